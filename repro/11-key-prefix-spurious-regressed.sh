#!/usr/bin/env bash
# Two key prefixes on one Redis from one home (ROW_FENCE_KEY_PREFIX): two separate stores whose
# boards may share a name. The home's floors are keyed by the URL only, so board-1 under prefix
# "a" at revision 5 makes board-1 under prefix "b" (revision 1) look regressed: the live holder
# is answered store_regressed, and the message tells the operator to run accept-regression.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-11.XXXXXX); PORT=${PORT:-17612}
trap 'kill -9 $RPID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
mkdir -p $W/r; chmod 700 $W
redis-server --port $PORT --bind 127.0.0.1 --dir $W/r --appendonly yes --appendfsync always \
  --save '' --maxmemory-policy noeviction --logfile $W/r/redis.log & RPID=$!; sleep 0.5
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=redis://127.0.0.1:$PORT; mkdir -m 700 -p $ROW_FENCE_HOME
for r in 1 2 3 4 5; do ROW_FENCE_KEY_PREFIX=a $BIN/row-fence acquire board-1 row-$r --lane lane-$r >/dev/null; done
ROW_FENCE_KEY_PREFIX=b $BIN/row-fence acquire board-1 row-1 --lane lane-x --write-descriptor $W/x.json; echo "prefix b acquire exit $? (want 0)"
ROW_FENCE_KEY_PREFIX=b $BIN/row-fence check --descriptor $W/x.json 2>&1 | tail -1; echo "prefix b check exit ${PIPESTATUS[0]} (want 0 ALLOWED)"
cat $ROW_FENCE_HOME/revisions.json | tr -d ' \n'; echo
