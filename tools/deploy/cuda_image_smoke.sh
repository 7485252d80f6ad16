#!/usr/bin/env bash
# Builds deploy/docker/Dockerfile.cuda's runtime image here, where no CUDA
# image can be pulled: CUDA_IMAGE is made from this machine's toolkit
# libraries (cudart, cuBLAS, cuBLASLt, NCCL under /usr/local/cuda/lib64)
# and the binaries are this machine's CUDA builds (BINARIES=prebuilt,
# `bazel build` with the toolkit present). Checks that every library but the
# driver's resolves in the image, that the worker runs as user 10001 on a
# read-only root, and that it reports the missing driver and falls back
# rather than crashing. No GPU is used (the GPU machine runs no containers).
#
#   tools/deploy/cuda_image_smoke.sh        (~2 min; copies ~800 MB of libraries)
#
# Needs what compose_smoke.sh needs, plus /usr/local/cuda; exits 77 with
# "SKIP: reason" without them.
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${TANDEM_DEPLOY_CACHE:-/var/tmp/tandem-deploy}
BASE_IMAGE=localhost/tandem-base:bookworm
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "cuda_image_smoke: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root"
command -v podman >/dev/null || skip "podman is not installed (tools/setup.sh --deploy)"
[ -x /usr/local/cuda/bin/nvcc ] || skip "no CUDA toolkit at /usr/local/cuda"
export CONTAINERS_CONF=$CACHE/containers.conf
[ -f "$CONTAINERS_CONF" ] && podman image exists "$BASE_IMAGE" ||
  skip "run tools/deploy/compose_smoke.sh once first (it makes $BASE_IMAGE and $CONTAINERS_CONF)"

ctx=$CACHE/cuda-ctx
rm -rf "$ctx" && mkdir -p "$ctx/usr/local/cuda/lib64"
cp -a /usr/local/cuda/lib64/libcudart.so* /usr/local/cuda/lib64/libcublas.so* \
  /usr/local/cuda/lib64/libcublasLt.so* /usr/local/cuda/lib64/libnccl.so* \
  "$ctx/usr/local/cuda/lib64/" || die "toolkit libraries missing under /usr/local/cuda/lib64"
rm -f "$ctx"/usr/local/cuda/lib64/*.a
printf 'FROM %s\nCOPY usr /usr\n' "$BASE_IMAGE" > "$ctx/Containerfile"
podman build --network host -t localhost/cuda-libs:local "$ctx" > "$CACHE/build-cuda-libs.log" 2>&1 ||
  die "building the CUDA libraries image failed; see $CACHE/build-cuda-libs.log"

cd "$ROOT"
# TANDEM_BAZEL_OUTPUT_BASE: the Bazel output base to build in (default Bazel's).
bazel() { command bazel ${TANDEM_BAZEL_OUTPUT_BASE:+--output_base="$TANDEM_BAZEL_OUTPUT_BASE"} "$@"; }
bazel build --jobs=2 //services/coordinator //services/dataserver //services/worker //tools/tandem \
  > "$CACHE/bazel-cuda.log" 2>&1 || die "bazel build failed; see $CACHE/bazel-cuda.log"
bin=$(bazel info bazel-bin 2>/dev/null)
case "$(ldd "$bin/services/worker/worker")" in *libcudart*) ;; *) die "the worker was built without CUDA (TANDEM_NO_CUDA set?)" ;; esac
prebuilt=deploy/docker/prebuilt
find "$prebuilt" -mindepth 1 ! -name README.md -delete
trap 'find "$ROOT/$prebuilt" -mindepth 1 ! -name README.md -delete' EXIT
for b in services/coordinator/coordinator services/dataserver/dataserver \
         services/worker/worker tools/tandem/tandem; do
  install -m 0755 "$bin/$b" "$prebuilt/"
done
podman build --network host --format docker --ignorefile deploy/docker/Dockerfile.cuda.dockerignore \
  -f deploy/docker/Dockerfile.cuda --build-arg "BASE=$BASE_IMAGE" --build-arg BINARIES=prebuilt \
  --build-arg CUDA_IMAGE=localhost/cuda-libs:local -t tandem-cuda:local . \
  > "$CACHE/build-cuda.log" 2>&1 || die "podman build of Dockerfile.cuda failed; see $CACHE/build-cuda.log"
uid=$(podman run --rm --network host --entrypoint /bin/bash tandem-cuda:local -c 'id -u') || die "cannot run the image"
[ "$uid" = 10001 ] || die "the image runs as uid $uid, not 10001"
out=$(podman run --rm --network host --read-only --no-healthcheck tandem-cuda:local --coordinator=127.0.0.1:1 \
        --data_servers=127.0.0.1:2 --backend=cuda --join_timeout_seconds=1 2>&1)
case "$out" in
  *'backend "cuda" unavailable'*) ;;
  *) die "the worker did not report the missing driver: $out" ;;
esac
echo "cuda_image_smoke: PASS (libraries resolve, uid 10001, read-only root, no driver reported)"
