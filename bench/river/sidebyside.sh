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
# WAL: the script reads pg_current_wal_lsn() with psql before and after each
# process, so "WAL/job (process)" is the same for both: schema creation and
# migration, the inserts, the checkpoint, the work, the client's stop and the
# schema's drop, divided by JOBS. durable bench does not report its own WAL;
# River's bench also reports its inserts and its work (checkpoint → last
# completion committed) apart. The WAL position is the server's: run this on
# a database server nothing else writes to.
#
# Environment: JOBS (default 200000); BUSY_CHECK, a command that succeeds
# while the machine is busy (e.g. "pgrep -f '[.]ci/run'", the brackets so
# that it does not find itself): each round waits, 30 s
# at a time, until it fails; OUT, a directory for the raw outputs (default a
# fresh temporary one, kept).
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

# run_one NAME FILE CMD...: runs CMD with its JSON on FILE.json and its log
# on FILE.log, and writes the WAL it caused (bytes) to FILE.wal.
run_one() {
  local name=$1 file=$2
  shift 2
  local before after
  before=$(lsn)
  if ! "$@" --json >"$file.json" 2>"$file.log"; then
    echo "$name failed; its log:" >&2
    tail -n 30 "$file.log" >&2
    exit 1
  fi
  after=$(lsn)
  wal_between "$before" "$after" >"$file.wal"
}

run_durable() {
  run_one durable "$out/durable-$1" "$out/durable" bench --database-url "$url" --scenario single --runs "$jobs"
}

run_river() {
  run_one river "$out/river-$1" "$out/riverbench" --database-url "$url" --jobs "$jobs"
}

printf '%-6s %14s %14s %16s %14s %14s %12s %12s\n' round "durable run/s" "River job/s" "River commit/s" "durable B/run" "River B/job" "River ins B" "River work B" | tee "$out/rounds.txt"
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
  d_rate=$(jq -r '.metrics[] | select(.key == "runs_per_s") | .value' "$d")
  v_rate=$(jq -r .jobs_per_s "$v")
  v_commit=$(jq -r .committed_per_s "$v")
  d_wal=$(awk -v b="$(cat "$out/durable-$r.wal")" -v n="$jobs" 'BEGIN { printf "%.0f", b / n }')
  v_wal=$(awk -v b="$(cat "$out/river-$r.wal")" -v n="$jobs" 'BEGIN { printf "%.0f", b / n }')
  v_ins=$(jq -r '.insert_wal_per_job | round' "$v")
  v_work=$(jq -r '.work_wal_per_job | round' "$v")
  printf '%-6s %14.0f %14.0f %16.0f %14s %14s %12s %12s\n' "$r" "$d_rate" "$v_rate" "$v_commit" "$d_wal" "$v_wal" "$v_ins" "$v_work" | tee -a "$out/rounds.txt"
done

# median COLUMN: the median of a column of rounds.txt.
median() {
  awk -v c="$1" 'NR > 1 { print $c }' "$out/rounds.txt" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
md=$(median 2) mv=$(median 3) mc=$(median 4) mdw=$(median 5) mvw=$(median 6) mvi=$(median 7) mvk=$(median 8)
printf '%-6s %14.0f %14.0f %16.0f %14.0f %14.0f %12.0f %12.0f\n' median "$md" "$mv" "$mc" "$mdw" "$mvw" "$mvi" "$mvk"
echo
awk -v d="$md" -v v="$mv" -v c="$mc" -v dw="$mdw" -v vw="$mvw" 'BEGIN {
  printf "durable/River throughput: %.2f (River to the last commit: %.2f)\n", d / v, d / c
  printf "durable/River WAL per run/job, whole process: %.2f\n", dw / vw
}'
echo "raw outputs: $out"
