#!/usr/bin/env bash
# Mutation testing by hand (not run by CI): does each test catch the bug it
# claims to? tests/mutation/run.sh [OPTION]...
#
# Takes a clean copy of the tree at REV (git archive, into a temporary
# folder: the working tree and the index are never touched), builds it once,
# checks that every named test passes on it, then for each mutant of
# tests/mutation/mutants.txt: replaces its line, rebuilds, runs the tests
# named for it and puts the line back. A mutant is "killed" when one of
# those tests fails, "survived" when they all pass, "build-error" when the
# mutant does not compile, "no-line" when the line is not in the file at REV
# (the code moved on: update the list). Mutants run one at a time.
#
#   --rev REV            what to copy (default HEAD)
#   --list FILE          the mutants (default tests/mutation/mutants.txt)
#   --only ID[,ID...]    just these mutants
#   --sanitize address   build with ASan+UBSan (overflows then fail loudly)
#   --jobs N             build jobs (default 2)
#   --keep               keep the temporary folder (builds and logs)
#   --check              only check that every mutant's line is in REV
#
# Prints one line per mutant and a summary; logs per mutant under the
# temporary folder (shown at the end with --keep). Exit 0 when every mutant
# was killed, 1 when any survived (or did not build or apply), 2 on usage
# or set-up errors (the baseline fails, REV does not build).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel) || exit 2
rev=HEAD
list=$here/mutants.txt
only=""
sanitize=""
jobs=2
keep=0
check_only=0

while [ $# -gt 0 ]; do
    case $1 in
    --rev) rev=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    --only) only=,$2,; shift 2 ;;
    --sanitize) sanitize=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --check) check_only=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done
[ -r "$list" ] || { echo "run.sh: cannot read $list" >&2; exit 2; }

# ---- parse the list: parallel arrays, one entry per mutant ----------------
ids=() files=() tests=() nths=() origs=() repls=()
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    case $line in
    '@ '*)
        read -r _ id file tst nth <<<"$line"
        if [ -z "${tst:-}" ]; then
            echo "run.sh: $list:$lineno: expected '@ ID FILE TESTS [#N]'" >&2
            exit 2
        fi
        ids+=("$id") files+=("$file") tests+=("$tst") nths+=("${nth:-#0}") origs+=("") repls+=("")
        ;;
    '- '*) origs[${#ids[@]} - 1]=${line:2} ;;
    '+ '*) repls[${#ids[@]} - 1]=${line:2} ;;
    ''|'#'*) ;;
    *) echo "run.sh: $list:$lineno: unexpected line: $line" >&2; exit 2 ;;
    esac
done <"$list"
for i in "${!ids[@]}"; do
    if [ -z "${origs[$i]}" ] || [ -z "${repls[$i]}" ]; then
        echo "run.sh: mutant ${ids[$i]}: needs a '- ' and a '+ ' line" >&2
        exit 2
    fi
done

selected() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sl-mutation.XXXXXX")
cleanup() { [ $keep = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/src" "$work/logs"
git -C "$repo" archive "$rev" | tar -x -C "$work/src" || { echo "run.sh: git archive $rev failed" >&2; exit 2; }
src=$work/src

# How many times the exact line occurs in a file.
count_line() { ORIG=$2 awk '$0 == ENVIRON["ORIG"] { k++ } END { print k + 0 }' "$1"; }

# Replace occurrence N (0: the only one) of the exact line.
apply() {
    local f=$1 orig=$2 repl=$3 nth=$4
    [ "$nth" = 0 ] && nth=1
    ORIG=$orig REPL=$repl NTH=$nth awk '
        $0 == ENVIRON["ORIG"] && ++k == ENVIRON["NTH"] { print ENVIRON["REPL"]; next }
        { print }' "$f" >"$f.mut" && mv "$f.mut" "$f"
}

# 0 when mutant i's line is where the list says.
line_ok() {
    local i=$1 f=$src/${files[$1]} n want=${nths[$1]#\#}
    [ -f "$f" ] || return 1
    n=$(count_line "$f" "${origs[$i]}")
    if [ "$want" = 0 ]; then [ "$n" = 1 ]; else [ "$n" -ge "$want" ]; fi
}

if [ $check_only = 1 ]; then
    bad=0
    for i in "${!ids[@]}"; do
        selected "${ids[$i]}" || continue
        if line_ok "$i"; then
            echo "ok       ${ids[$i]}"
        else
            echo "no-line  ${ids[$i]}: ${files[$i]}: '${origs[$i]}' (${nths[$i]})"
            bad=1
        fi
    done
    exit $bad
fi

# ---- build once, check the baseline --------------------------------------
cfg=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_WERROR=OFF)
[ -n "$sanitize" ] && cfg+=(-DSLUICE_SANITIZE="$sanitize")
echo "run.sh: $(git -C "$repo" rev-parse --short "$rev") in $work; building (${cfg[*]})"
if ! { cmake -S "$src" -B "$work/build" "${cfg[@]}" && cmake --build "$work/build" -j "$jobs"; } \
        >"$work/logs/baseline-build.log" 2>&1; then
    echo "run.sh: the unmutated tree does not build:" >&2
    tail -20 "$work/logs/baseline-build.log" >&2
    keep=1
    exit 2
fi
export TSAN_OPTIONS="halt_on_error=1 suppressions=$src/tests/tsan.supp"
regex() { echo "^($(echo "$1" | sed 's/,/|/g'))\$"; }
all_tests=$(for i in "${!ids[@]}"; do selected "${ids[$i]}" && echo "${tests[$i]}"; done | tr , '\n' | sort -u | paste -sd,)
echo "run.sh: baseline: $all_tests"
# a misspelt test name would run nothing and let every mutant "survive"
for t in $(echo "$all_tests" | tr , ' '); do
    if ! ctest --test-dir "$work/build" -N -R "^$t\$" | grep -q "^Total Tests: 1$"; then
        echo "run.sh: no test named $t at $rev" >&2
        exit 2
    fi
done
if ! ctest --test-dir "$work/build" -R "$(regex "$all_tests")" --output-on-failure \
        >"$work/logs/baseline-tests.log" 2>&1; then
    echo "run.sh: a test fails on the unmutated tree (a kill would mean nothing):" >&2
    grep -E "Failed|\*\*\*" "$work/logs/baseline-tests.log" >&2
    keep=1
    exit 2
fi

# ---- one mutant at a time ------------------------------------------------
killed=() survived=() broken=()
for i in "${!ids[@]}"; do
    id=${ids[$i]}
    selected "$id" || continue
    f=$src/${files[$i]}
    log=$work/logs/$id.log
    t0=$(date +%s)
    if ! line_ok "$i"; then
        printf '%-12s %-26s %s\n' no-line "$id" "${files[$i]}: the line is not there (${nths[$i]})"
        broken+=("$id(no-line)")
        continue
    fi
    cp "$f" "$work/pristine"
    apply "$f" "${origs[$i]}" "${repls[$i]}" "${nths[$i]#\#}"
    { echo "mutant $id: ${files[$i]}"; diff -u "$work/pristine" "$f"; } >"$log"
    if ! cmake --build "$work/build" -j "$jobs" >>"$log" 2>&1; then
        result=build-error
        broken+=("$id(build-error)")
    elif ctest --test-dir "$work/build" -R "$(regex "${tests[$i]}")" --output-on-failure >>"$log" 2>&1; then
        result=SURVIVED
        survived+=("$id")
    else
        result=killed
        killed+=("$id")
    fi
    cp "$work/pristine" "$f" # a new mtime: the next build recompiles it
    by=""
    [ $result = killed ] && by=$(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*\(Failed\|Exception\|Timeout\).*/\1/p' "$log" | paste -sd,)
    printf '%-12s %-26s %4ss  %s\n' "$result" "$id" $(($(date +%s) - t0)) "${by:+by $by}"
done
# leave the build matching the source again
cmake --build "$work/build" -j "$jobs" >/dev/null 2>&1

echo "run.sh: ${#killed[@]} killed, ${#survived[@]} survived, ${#broken[@]} not run"
[ ${#survived[@]} -gt 0 ] && echo "survived: ${survived[*]}"
[ ${#broken[@]} -gt 0 ] && echo "not run: ${broken[*]}"
[ $keep = 1 ] && echo "run.sh: builds and logs kept in $work"
[ ${#survived[@]} -eq 0 ] && [ ${#broken[@]} -eq 0 ]
