"""pip install . at the repository root: the same build as in python/
(python/setup.py says how)."""
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "python", "setup.py"), run_name="__main__")
