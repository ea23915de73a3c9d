#!/usr/bin/env bash
# Build the C kernel tests (tests/c/test_kernels.c against dmlstride/src) with
# AddressSanitizer and UndefinedBehaviorSanitizer and run them, with and
# without the SIMD variants; then build the extension with AddressSanitizer
# in a temporary copy of the repository and run the test suite (and a
# bounded fuzz run) against it.
#
#   tests/asan.sh                    # whole suite, then 30 s of fuzzing
#   tests/asan.sh -m "not bigmem"    # extra arguments go to pytest
#   ASAN_FUZZ_SECONDS=600 tests/asan.sh
#   ASAN_FROM=HEAD tests/asan.sh     # the last commit instead of the working tree
#
# Needs gcc (or a CC that understands -fsanitize=address) and its libasan.
# The working tree's own in-place build is left alone.  Python allocates
# through malloc (PYTHONMALLOC=malloc) so that ASan also guards the memory of
# bytes and bytearray buffers; leak detection is off because the interpreter
# deliberately leaks at exit.  Exit status: 0 when the tests pass and ASan
# reports nothing.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cc=${CC:-gcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

libasan=$("$cc" -print-file-name=libasan.so)
if [ ! -e "$libasan" ]; then
    echo "asan: $cc has no libasan.so; install it (e.g. the libasan package of your compiler)" >&2
    exit 2
fi

mkdir -p "$work/src"
if [ "${ASAN_FROM:-}" = HEAD ]; then
    echo "== export the last commit to $work/src"
    (cd "$repo" && git archive HEAD) | tar -x -C "$work/src" || exit 2
else
    echo "== copy the working tree to $work/src"
    (cd "$repo" && git ls-files --cached --others --exclude-standard -z \
        | grep -zv -e '\.so$' -e '^dmlstride/_engine\.c$' -e '^build/' \
        | xargs -0 cp --parents -t "$work/src" 2>/dev/null) || true
fi
cd "$work/src" || exit 2
rm -rf build dmlstride/_engine*.so dmlstride/_engine.c

echo "== build with -fsanitize=address"
export DMLSTRIDE_DEBUG=1  # keep symbols and line numbers for the reports
export DMLSTRIDE_EXTRA_CFLAGS="-fsanitize=address -fno-omit-frame-pointer"
export DMLSTRIDE_EXTRA_LDFLAGS="-fsanitize=address"
if ! "$python" setup.py -q build_ext --inplace > "$work/build.log" 2>&1; then
    cat "$work/build.log"
    echo "asan: build failed" >&2
    exit 2
fi
so=$(ls dmlstride/_engine*.so)
if ! nm -D "$so" | grep __asan_ > /dev/null; then
    echo "asan: $so is not instrumented" >&2
    exit 2
fi

echo "== C kernel tests with -fsanitize=address,undefined"
kernels=$(ls dmlstride/src/*.c | grep -v -e '/alloc\.c$' -e '/convert[^/]*\.c$' -e '/quant[^/]*\.c$')
for simd in "" -DDMLSTRIDE_NO_SIMD; do
    # shellcheck disable=SC2086
    if ! "$cc" -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
            -pthread $simd -I dmlstride/src tests/c/test_kernels.c $kernels -o "$work/test_kernels"; then
        echo "asan: the C kernel tests did not build" >&2
        exit 2
    fi
    if ! ASAN_OPTIONS=detect_leaks=1 "$work/test_kernels"; then
        echo "asan: the C kernel tests failed ${simd:+($simd)}" >&2
        exit 1
    fi
done

export LD_PRELOAD="$libasan"
export PYTHONMALLOC=malloc

# Canary: the set-up must catch a read past the end of a bytearray.
if ASAN_OPTIONS="detect_leaks=0:log_path=$work/canary" "$python" -c "
import ctypes
b = bytearray(16)
ctypes.string_at((ctypes.c_char * 16).from_buffer(b), 64)
" > /dev/null 2>&1 || ! grep -q heap-buffer-overflow "$work"/canary.* 2>/dev/null; then
    echo "asan: the canary overflow went undetected; ASan is not active" >&2
    exit 2
fi
echo "== canary: ASan caught a deliberate heap-buffer-overflow"

# Timing bounds in the tests scale for an instrumented build (several times slower).
export DMLSTRIDE_TIME_SCALE=${DMLSTRIDE_TIME_SCALE:-20}
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1:log_path=$work/asan"
fuzz_seconds=${ASAN_FUZZ_SECONDS:-30}

where=$("$python" -c "import dmlstride._engine as e; print(e.__file__)")
case "$where" in
  "$work"/src/*) echo "== testing the instrumented engine at $where" ;;
  *) echo "asan: imported $where instead of the instrumented build" >&2; exit 2 ;;
esac

"$python" -m pytest -q -p no:cacheprovider "$@" tests 2>&1 | tee "$work/pytest.log"
status=${PIPESTATUS[0]}

echo "== fuzz for $fuzz_seconds s under ASan"
PYTHONPATH="$work/src${PYTHONPATH:+:$PYTHONPATH}" "$python" tests/fuzz/fuzz_api.py --engine hypothesis --seconds "$fuzz_seconds" 2>&1 | tee "$work/fuzz.log"
fuzz_status=${PIPESTATUS[0]}
[ "$fuzz_status" -eq 0 ] || status=1

reports=$(ls "$work"/asan.* 2>/dev/null | wc -l)
echo
echo "== AddressSanitizer summary"
echo "pytest: $(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed).* =+$' "$work/pytest.log" | tail -n 1)"
echo "fuzz: $(grep -E '^executions: ' "$work/fuzz.log" | tail -n 1) (exit status $fuzz_status)"
if [ "$reports" -gt 0 ]; then
    echo "ASan: $reports report(s):"
    cat "$work"/asan.*
    exit 1
fi
echo "ASan: no errors reported"
exit "$status"
