#!/usr/bin/env python3
"""A cluster of "hosts" on one machine, for sluice's cluster tests.

Each host is a Linux network namespace with its own loopback and one
interface, eth0, whose other end is a port of a bridge. The bridge lives in
a namespace of its own (the "switch"), so nothing is added to the machine's
own network: no interface, no route, no address. The hosts' addresses come
from 198.18.0.0/15, the range set aside for benchmark networks (RFC 2544);
no namespace has a default route and IPv6 is off, so no packet can leave
the cluster. A host's MAC is fixed (from its address): powered off and on
again, it is the same machine to its peers' ARP caches.

Every name begins with a prefix unique to the run ("slc<pid>"), so two runs
at once do not meet. A process started on a host is the leader of its own
process group (its own session), and dies with the test process
(PR_SET_PDEATHSIG); a trainer can be started in a PID namespace of its own
(`unshare --pid --fork --mount-proc`), where /proc shows no feeder: it
cannot map a feeder's shared piece memory, so its pieces travel over the
link, by copy, as between real hosts.

down() (also run at exit, on SIGINT and SIGTERM through the integration
harness) kills every process group it started and every process left in
its namespaces, then deletes the namespaces, which takes the veth pairs
and the bridge with them. Namespaces left by a run that was killed
outright (SIGKILL) are deleted by the next run: their owner's pid is in
their name.

Library:
    net = Cluster(["f0", "f1", "t0", "t1"])   # raises Unavailable
    net.up()
    p = net.spawn("t0", [TRAINER, ...], log=path, pidns=True)
    net.addr("f0")           -> "198.18.0.10"
    net.cut("t0") / net.mend("t0")           # the host's cable: switch port down / up
    net.power_off("f0") / net.power_on("f0") # the host and everything on it gone / a fresh one
    net.down()

Command line (root), for trying things by hand:
    tests/cluster/netns.py [--hosts f0,t0,...] [-- COMMAND...]
makes the cluster, runs COMMAND (default: an interactive shell) with
SLUICE_NS_<HOST> (namespace) and SLUICE_ADDR_<HOST> (address) in its
environment, and tears everything down when it ends (Ctrl-C goes to the
command) or on SIGTERM; exits with the command's status, or 77 where
namespaces cannot be made. Run a program on a host with
`ip netns exec $SLUICE_NS_T0 PROGRAM`. docs/testbed.md tells more.
"""
import atexit
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402

NET = "198.18.0"   # hosts get NET.10, NET.11, ... in 198.18.0.0/24, inside 198.18.0.0/15
PREFIX_LEN = 24
SKIP = 77          # ctest's SKIP_RETURN_CODE for the cluster tests


class Unavailable(Exception):
    """Network or PID namespaces cannot be made here (not root, no ip, a
    container without CAP_SYS_ADMIN...): the tests are skipped, not passed."""


def _ip(*args, check=True):
    p = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("ip %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p


_libc = None


def _die_with_parent():
    """In the child, before exec: SIGKILL when the test process dies (even by
    SIGKILL, when no handler of ours runs). PR_SET_PDEATHSIG survives exec
    (of non-setuid programs), so it holds for `ip netns exec`'s program and
    is passed on by `unshare --kill-child`."""
    os.setsid()
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _alive(pid):
    """pid runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def sweep_stale():
    """Delete namespaces left by runs that died without tearing down (their
    owner pid, in the name, is gone). Others' live runs are left alone."""
    p = _ip("netns", "list", check=False)
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(r"slc(\d+)-", name)
        if m and not _alive(int(m.group(1))):
            for pid in _ip("netns", "pids", name, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            _ip("netns", "del", name, check=False)


def check_available():
    """Raise Unavailable with the reason when this machine cannot host the
    cluster: network namespaces, veth pairs, a bridge, PID namespaces."""
    global _libc
    if os.geteuid() != 0:
        raise Unavailable("not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN")
    try:
        _ip("-V")
    except (OSError, RuntimeError) as e:
        raise Unavailable("no usable ip (iproute2): %s" % e)
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError as e:
        raise Unavailable("cannot load libc for prctl: %s" % e)
    probe = "slc%d-probe" % os.getpid()
    try:
        _ip("netns", "add", probe)
        try:
            _ip("-n", probe, "link", "add", "pa", "type", "veth", "peer", "name", "pb")
            _ip("-n", probe, "link", "add", "pbr", "type", "bridge")
            p = subprocess.run(["ip", "netns", "exec", probe, "unshare", "--pid", "--fork", "--mount-proc",
                                "sh", "-c", "echo $$; ls /proc | grep -c '^[0-9]'"],
                               capture_output=True, text=True, timeout=20)
            if p.returncode != 0:
                raise Unavailable("unshare --pid --fork --mount-proc failed: %s" % p.stderr.strip())
            if p.stdout.split()[:1] != ["1"]:
                raise Unavailable("unshare --pid did not give a PID namespace: %r" % p.stdout)
        finally:
            _ip("netns", "del", probe, check=False)
    except RuntimeError as e:
        raise Unavailable(str(e))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable("%s" % e)


class Cluster:
    def __init__(self, hosts, prefix=None):
        if len(hosts) > 200:
            raise ValueError("at most 200 hosts")
        self.hosts = list(hosts)
        self.prefix = prefix or "slc%d" % os.getpid()
        self.switch = self.prefix + "-sw"
        self._addr = {h: "%s.%d" % (NET, 10 + i) for i, h in enumerate(self.hosts)}
        self._procs = []     # every Popen we started (each the leader of its process group)
        self._up = set()     # hosts whose namespace exists
        self._switch_up = False

    # -- names ---------------------------------------------------------------
    def ns(self, host):
        return "%s-%s" % (self.prefix, host)

    def addr(self, host):
        return self._addr[host]

    def mac(self, host):
        """The host's eth0 MAC, fixed (locally administered, from its address):
        a host powered on again keeps its network card, so its peers' ARP
        entries stay right, as on a real machine that reboots."""
        return "02:00:" + ":".join("%02x" % int(x) for x in self.addr(host).split("."))

    def port(self, host):
        """The host's port on the switch (an interface of the switch namespace)."""
        return "p%d" % self.hosts.index(host)

    # -- making and unmaking ---------------------------------------------------
    def up(self):
        check_available()
        sweep_stale()
        atexit.register(self.down)
        _ip("netns", "add", self.switch)
        self._switch_up = True
        self._no_ipv6(self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for h in self.hosts:
            self._host_up(h)
        self.check_routes()
        return self

    def _no_ipv6(self, ns):
        """No IPv6 on the cluster's links (no link-local addresses either):
        IPv4 in 198.18.0.0/15 and the loopback are all there is. Where the
        kernel has no IPv6, there is nothing to turn off."""
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c",
                        "for k in all default; do f=/proc/sys/net/ipv6/conf/$k/disable_ipv6; "
                        "[ -w $f ] && echo 1 >$f; done; true"], check=True)

    def _host_up(self, host):
        ns = self.ns(host)
        _ip("netns", "add", ns)
        self._up.add(host)
        self._no_ipv6(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        # the veth pair is made in the switch namespace, its host end moved
        # straight into the host: neither end ever exists in the machine's own
        _ip("-n", self.switch, "link", "add", self.port(host), "type", "veth", "peer", "name", "eth0",
            "address", self.mac(host), "netns", ns)
        _ip("-n", self.switch, "link", "set", self.port(host), "master", "br0")
        _ip("-n", self.switch, "link", "set", self.port(host), "up")
        _ip("-n", ns, "addr", "add", "%s/%d" % (self.addr(host), PREFIX_LEN), "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")

    def check_routes(self):
        """Every host's only route is its own subnet of 198.18.0.0/15 on eth0
        (and the loopback's); no default route anywhere."""
        for h in sorted(self._up):
            routes = json.loads(_ip("-n", self.ns(h), "-j", "route", "show", "table", "all").stdout or "[]")
            for r in routes:
                dst, dev = r.get("dst", ""), r.get("dev", "")
                if dst == "default":
                    raise RuntimeError("host %s has a default route: %r" % (h, r))
                if dev == "lo" or (r.get("type") in ("local", "broadcast") and dev == "eth0" and
                                   dst.startswith(NET + ".")):
                    continue
                if dst != "%s.0/%d" % (NET, PREFIX_LEN) or dev != "eth0":
                    raise RuntimeError("host %s has a route out of the cluster: %r" % (h, r))

    def wait_reachable(self, host, peer, timeout=10):
        """Until host reaches peer: a TCP connection to a closed port of peer
        is refused (a RST came back through the bridge), not timed out."""
        probe = ("import socket, sys\n"
                 "s = socket.socket(); s.settimeout(1)\n"
                 "try:\n    s.connect((sys.argv[1], 9))\nexcept ConnectionRefusedError:\n    sys.exit(0)\n"
                 "except OSError:\n    sys.exit(1)\n")
        deadline = time.time() + timeout
        while True:
            p = self.run(host, [sys.executable, "-c", probe, self.addr(peer)], capture_output=True)
            if p.returncode == 0:
                return
            if time.time() > deadline:
                raise RuntimeError("%s cannot reach %s (%s)" % (host, peer, self.addr(peer)))
            time.sleep(0.1)

    def _kill_host_procs(self, host):
        ns = self.ns(host)
        for pid in _ip("netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def down(self):
        """Kill everything we started, delete every namespace (idempotent)."""
        for p in self._procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for h in list(self._up):
            self._kill_host_procs(h)
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for h in list(self._up):
            _ip("netns", "del", self.ns(h), check=False)
            self._up.discard(h)
        if self._switch_up:
            _ip("netns", "del", self.switch, check=False)
            self._switch_up = False

    # -- processes -------------------------------------------------------------
    def spawn(self, host, args, log=None, pidns=False, **kw):
        """Start args on host, in a process group of its own (through the
        integration harness: killed and its log shown when a case fails).
        pidns: in a PID namespace of its own, with its own /proc (`unshare
        --pid --fork --mount-proc --kill-child`: the program is pid 1 there
        and dies with unshare)."""
        cmd = ["ip", "netns", "exec", self.ns(host)]
        if pidns:
            cmd += ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        p = harness.spawn(cmd + list(args), log=log, preexec_fn=_die_with_parent, **kw)
        self._procs.append(p)
        return p

    def run(self, host, args, **kw):
        """subprocess.run on host (for short commands)."""
        return subprocess.run(["ip", "netns", "exec", self.ns(host)] + list(args), **kw)

    def kill(self, p, sig=signal.SIGKILL):
        """Signal p's whole process group (unshare and the program under it)."""
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass

    # -- faults ------------------------------------------------------------------
    def cut(self, host):
        """The host's cable is pulled: its switch port goes down. The host's
        eth0 loses its carrier; whatever either side sends is lost, and no
        one is told (no RST, no ICMP)."""
        _ip("-n", self.switch, "link", "set", self.port(host), "down")

    def mend(self, host):
        _ip("-n", self.switch, "link", "set", self.port(host), "up")

    def power_off(self, host):
        """The host is gone at once: its cable is cut first, so nothing its
        dying processes' kernels would say (FIN, RST) reaches anyone; then
        every process on it is killed and its namespace deleted."""
        self.cut(host)
        self._kill_host_procs(host)
        for p in self._procs:
            if p.args[:4] == ["ip", "netns", "exec", self.ns(host)] and p.poll() is None:
                self.kill(p)
                p.wait(timeout=10)
        # the pair goes now (with the namespace it would go whenever the
        # kernel's clean-up gets to it, and a new host could not take the port)
        _ip("-n", self.switch, "link", "del", self.port(host))
        _ip("netns", "del", self.ns(host))
        self._up.discard(host)

    def power_on(self, host):
        """A fresh host with the same name and address (a new MAC, no state)."""
        self._host_up(host)
        self.check_routes()

    def link_bytes(self, host):
        """(rx_bytes, tx_bytes) of the host's eth0."""
        st = json.loads(_ip("-n", self.ns(host), "-j", "-s", "link", "show", "dev", "eth0").stdout)[0]
        return st["stats64"]["rx"]["bytes"], st["stats64"]["tx"]["bytes"]


def require(hosts):
    """The tests' entry: a cluster that is up, or exit 77 with the reason."""
    net = Cluster(hosts)
    try:
        net.up()
    except Unavailable as e:
        net.down()
        print("SKIP: cannot make a cluster of network namespaces here: %s" % e)
        sys.stdout.flush()
        sys.exit(SKIP)
    for h in hosts[1:]:
        net.wait_reachable(hosts[0], h)
    return net


def main(argv):
    hosts = ["f0", "f1", "t0", "t1"]
    cmd = [os.environ.get("SHELL", "/bin/sh")]
    if argv[:1] == ["--hosts"] and len(argv) >= 2:
        hosts = [h for h in argv[1].split(",") if h]
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
        if argv:
            cmd = argv
    elif argv:
        print(__doc__.split("Command line", 1)[1], file=sys.stderr)
        return 2
    if not all(re.fullmatch(r"[a-z0-9]{1,8}", h) for h in hosts):
        print("netns.py: host names are 1-8 lower-case letters or digits", file=sys.stderr)
        return 2
    net = require(hosts)
    # Ctrl-C is the command's (it gets it from the terminal); SIGTERM ends it
    # and tears down, without the test harness's report
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = dict(os.environ)
    for h in hosts:
        env["SLUICE_NS_" + h.upper()] = net.ns(h)
        env["SLUICE_ADDR_" + h.upper()] = net.addr(h)
        print("host %-8s namespace %-16s address %s" % (h, net.ns(h), net.addr(h)))
    sys.stdout.flush()
    child = subprocess.Popen(cmd, env=env)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
        net.down()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
