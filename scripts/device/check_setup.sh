# What both device checks (run_allocator_check.sh, run_steady_check.sh) do before their runs, sourced by
# them with $script set to the caller's name and "$@" its arguments: the folders ($here, $root, $out),
# the interpreter ($PY) and census ($CENSUS), the options (--cpu-fallback -> $device, --only -> $only,
# --toys-only -> $llama8b empty), the offline environment, the log ($log, say) and the versions the
# machine runs, printed first in it.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-./out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
PY=${PY:-python3}
CENSUS=${CENSUS:-$root/build/census}
device=cuda
only=""
llama8b="--llama8b"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-fallback) device=cpu ;;
    --only) shift; only="${1:-}" ;;
    --toys-only) llama8b="" ;;
    *) echo "$script: unknown option $1 (ignored)" ;;
  esac
  shift
done
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_NO_ADVISORY_WARNINGS=1 HF_HUB_DISABLE_TELEMETRY=1 USE_HUB_KERNELS=0
log="$out/run.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }
began=$(date +%s)
say "== $(date -u +%FT%TZ) $(nproc) cpus; device: $device; out: $out"
timeout 20 "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '', \
'transformers', transformers.__version__)" 2>&1 | tee -a "$log"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total \
  --format=csv,noheader 2>&1 | tee -a "$log"
