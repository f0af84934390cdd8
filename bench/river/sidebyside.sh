#!/usr/bin/env bash
# sidebyside.sh DATABASE_URL [ROUNDS]
#
# Runs `durable bench --scenario single --runs $JOBS` and this directory's
# River bench (`--jobs $JOBS`) interleaved ROUNDS times (default 3; the
# order alternates: durable first in odd rounds, River first in even ones),
# then prints each round, the medians and the ratios durable/River.
#
# Throughput: durable's runs/s from the first claim to the last completion
# (tasks.started_at → finished_at); River's jobs/s from the first
# attempted_at to the last finalized_at, and also to the last completion
# committed (River stamps finalized_at with the client's clock before its
# batched completer commits).
#
# WAL: durable bench does not report its WAL, so the script reads
# pg_current_wal_lsn() with psql, the same way for both: before the process
# starts, when its log says its schema is ready (migrated), when its log says
# the inserts are done (both log it before their CHECKPOINT and before any
# worker starts), and after the process ends. Per run or job:
#   ins   the inserts (schema ready → inserts done);
#   rest  the CHECKPOINT, the work, stopping and dropping the schema
#         (inserts done → process ended);
#   all   the whole process, schema creation and migration included.
# River's bench also measures its own inserts and its work (checkpoint → last
# completion committed) from inside; they are in river-N.json. The WAL
# position is the server's: run this where nothing else writes to the
# database server.
#
# Environment: JOBS (default 200000); BUSY_CHECK, a command that succeeds
# while the machine is busy, e.g. "bench/river/busy.sh '$DATABASE_URL'"
# (another client connected, or the CPUs busy), run from the repository's
# root: each round waits, 30 s at a time, until it fails; OUT, a directory
# for the raw outputs (default a fresh temporary one, kept).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 DATABASE_URL [ROUNDS]" >&2
  exit 2
fi
url=$1
rounds=${2:-3}
jobs=${JOBS:-200000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$(mktemp -d /tmp/sidebyside.XXXXXX)}
mkdir -p "$out"

echo "building durable ($root) and the River bench ($here) into $out" >&2
(cd "$root" && go build -o "$out/durable" ./cmd/durable)
(cd "$here" && go build -o "$out/riverbench" .)

lsn() { psql "$url" -XAtqc 'SELECT pg_current_wal_lsn()'; }
wal_between() { psql "$url" -XAtqc "SELECT pg_wal_lsn_diff('$2', '$1')::bigint"; }

wait_quiet() {
  [ -n "${BUSY_CHECK:-}" ] || return 0
  while eval "$BUSY_CHECK" >/dev/null 2>&1; do
    echo "busy ($BUSY_CHECK); waiting 30 s" >&2
    sleep 30
  done
}

# watch_log FILE: copies its input (a bench's log) to FILE.log and reads the
# WAL position into FILE.lsn-ready and FILE.lsn-inserted when the log says
# the schema is ready and the inserts are done ("inserted N runs in" or
# "inserted N jobs in"; not the "inserted N of M" progress lines).
watch_log() {
  local file=$1 line
  : >"$file.log"
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$file.log"
    if [[ $line =~ :\ schema\ [a-z0-9_]+\ ready ]]; then
      lsn >"$file.lsn-ready"
    elif [[ $line =~ :\ inserted\ [0-9]+\ (runs|jobs)\ in\  ]]; then
      lsn >"$file.lsn-inserted"
    fi
  done
}

# run_one NAME FILE CMD...: runs CMD --json, its JSON on FILE.json and its
# log on FILE.log, and writes the WAL of its phases, in bytes, to FILE.wal:
# "inserts rest all".
run_one() {
  local name=$1 file=$2
  shift 2
  local before after
  rm -f "$file.lsn-ready" "$file.lsn-inserted"
  before=$(lsn)
  set +e
  "$@" --json 2>&1 >"$file.json" | watch_log "$file"
  local status=${PIPESTATUS[0]}
  set -e
  after=$(lsn)
  if [ "$status" -ne 0 ] || [ ! -s "$file.lsn-ready" ] || [ ! -s "$file.lsn-inserted" ]; then
    echo "$name failed (exit status $status) or did not log its phases; its log:" >&2
    tail -n 30 "$file.log" >&2
    exit 1
  fi
  echo "$(wal_between "$(cat "$file.lsn-ready")" "$(cat "$file.lsn-inserted")")" \
    "$(wal_between "$(cat "$file.lsn-inserted")" "$after")" \
    "$(wal_between "$before" "$after")" >"$file.wal"
}

run_durable() {
  run_one durable "$out/durable-$1" "$out/durable" bench --database-url "$url" --scenario single --runs "$jobs"
}

run_river() {
  run_one river "$out/river-$1" "$out/riverbench" --database-url "$url" --jobs "$jobs"
}

per_job() { awk -v n="$jobs" '{ printf "%.0f %.0f %.0f", $1 / n, $2 / n, $3 / n }' "$1"; }

cat <<EOF
$jobs runs (durable) and jobs (River) per round. Throughput: durable runs/s
(first claim → last completion), River jobs/s (first attempted_at → last
finalized_at; "commit": → last completion committed). WAL in bytes per run or
job: ins (inserts), rest (checkpoint, work, stop, drop), all (the process).

EOF
fmt='%-6s %9s %9s %9s | %7s %7s %7s | %7s %7s %7s\n'
printf "$fmt" "" durable River River durable durable durable River River River | tee "$out/rounds.txt"
printf "$fmt" round run/s job/s commit ins rest all ins rest all | tee -a "$out/rounds.txt"
for r in $(seq 1 "$rounds"); do
  wait_quiet
  if [ $((r % 2)) -eq 1 ]; then
    run_durable "$r"
    run_river "$r"
  else
    run_river "$r"
    run_durable "$r"
  fi
  d=$out/durable-$r.json
  v=$out/river-$r.json
  [ "$(jq -r .verified "$d")" = true ] || { echo "durable round $r not verified" >&2; exit 1; }
  [ "$(jq -r .verified "$v")" = true ] || { echo "River round $r not verified" >&2; exit 1; }
  d_rate=$(jq -r '.metrics[] | select(.key == "runs_per_s") | .value | round' "$d")
  v_rate=$(jq -r '.jobs_per_s | round' "$v")
  v_commit=$(jq -r '.committed_per_s | round' "$v")
  read -r d_ins d_rest d_all <<<"$(per_job "$out/durable-$r.wal")"
  read -r v_ins v_rest v_all <<<"$(per_job "$out/river-$r.wal")"
  printf "$fmt" "$r" "$d_rate" "$v_rate" "$v_commit" "$d_ins" "$d_rest" "$d_all" "$v_ins" "$v_rest" "$v_all" | tee -a "$out/rounds.txt"
done

# median COLUMN: the median of a column of the rounds (fields counted with
# the "|" separators).
median() {
  awk -v c="$1" 'NR > 2 { print $c }' "$out/rounds.txt" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.0f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
m=()
for c in 2 3 4 6 7 8 10 11 12; do m+=("$(median $c)"); done
printf "$fmt" median "${m[@]}"
echo
awk -v d="${m[0]}" -v v="${m[1]}" -v c="${m[2]}" -v di="${m[3]}" -v dr="${m[4]}" -v da="${m[5]}" \
  -v vi="${m[6]}" -v vr="${m[7]}" -v va="${m[8]}" 'BEGIN {
  printf "durable/River throughput: %.2f (River to the last commit: %.2f)\n", d / v, d / c
  printf "durable/River WAL per run/job: inserts %.2f, rest %.2f, whole process %.2f\n", di / vi, dr / vr, da / va
}'
echo "raw outputs: $out"
