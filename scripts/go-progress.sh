# Sourced by the scripts that build Go binaries: what a long, cold build is doing.
#   go_phase TEXT             one line: the phase that starts, and the time so far
#   go build -v ... 2>&1 | go_progress LABEL
#                             `go build -v` names each package it compiles: those become a
#                             count, a line every PROGRESS_EVERY packages; anything else
#                             (an error) passes through on stderr as it is
PROGRESS_EVERY="${PROGRESS_EVERY:-100}"

go_phase() {
  echo "[$(printf '%4ds' "$SECONDS")] $*" >&2
}

go_progress() {
  local label="$1" line n=0
  while IFS= read -r line; do
    if [[ "$line" =~ ^[A-Za-z0-9._~/-]+$ ]]; then
      n=$((n + 1))
      if ((n % PROGRESS_EVERY == 0)); then go_phase "$label: $n packages compiled"; fi
    else
      echo "$line" >&2
    fi
  done
  go_phase "$label: $n packages in all"
}
