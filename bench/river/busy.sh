#!/usr/bin/env bash
# busy.sh [DATABASE_URL]: exits 0 (busy) when another client is connected to
# the database server, or when the CPUs were more than 15% busy over 5 s;
# 1 when quiet. For sidebyside.sh's BUSY_CHECK:
#
#   BUSY_CHECK="bench/river/busy.sh '$DATABASE_URL'" bench/river/sidebyside.sh "$DATABASE_URL"
set -u
url=${1:-${DATABASE_URL:-}}
[ -n "$url" ] || { echo "usage: $0 DATABASE_URL" >&2; exit 2; }
others=$(psql "$url" -XAtqc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()") || exit 0
[ "$others" -gt 0 ] && exit 0
read -r _ u1 n1 s1 i1 w1 q1 sq1 st1 _ </proc/stat
sleep 5
read -r _ u2 n2 s2 i2 w2 q2 sq2 st2 _ </proc/stat
busy=$(((u2 + n2 + s2 + q2 + sq2 + st2) - (u1 + n1 + s1 + q1 + sq1 + st1)))
idle=$(((i2 + w2) - (i1 + w1)))
[ $((100 * busy / (busy + idle))) -gt 15 ] && exit 0
exit 1
