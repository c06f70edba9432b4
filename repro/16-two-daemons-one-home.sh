#!/usr/bin/env bash
# Two daemons on one home (the second started by mistake, same socket; then a second socket), Redis
# restored from an AOF taken before lane-b's takeover. Want: lane-a never ALLOWED from either.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-16.XXXXXX); PORT=${PORT:-17616}
trap 'kill -9 $RPID $D1 $D2 $D3 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
mkdir -p $W/r; chmod 700 $W
start_redis() { redis-server --port $PORT --bind 127.0.0.1 --dir $W/r --appendonly yes --appendfsync always \
  --save '' --maxmemory-policy noeviction --logfile $W/r/redis.log & RPID=$!; sleep 0.5; }
start_redis
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=redis://127.0.0.1:$PORT; mkdir -m 700 -p $ROW_FENCE_HOME
$BIN/row-fence-resident 2>$W/d1.log & D1=$!; sleep 0.5
$BIN/row-fence-resident 2>$W/d2.log & D2=$!; sleep 0.5
echo "second daemon alive: $(kill -0 $D2 2>/dev/null && echo yes || echo no)"; tail -2 $W/d2.log
ROW_FENCE_SOCKET=$W/s3/sock $BIN/row-fence-resident 2>$W/d3.log & D3=$!; sleep 0.5
$BIN/row-fence acquire board-1 row-1 --lane lane-a --write-descriptor $W/a.json >/dev/null
$BIN/row-fence-ask --descriptor $W/a.json; ROW_FENCE_SOCKET=$W/s3/sock $BIN/row-fence-ask --descriptor $W/a.json
redis-cli -p $PORT BGREWRITEAOF >/dev/null; sleep 1; cp -a $W/r/appendonlydir $W/aof-before
$BIN/row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor $W/b.json >/dev/null; echo "takeover exit $?"
kill -9 $RPID; wait $RPID 2>/dev/null; rm -rf $W/r/appendonlydir; cp -a $W/aof-before $W/r/appendonlydir; start_redis
for i in 1 2; do $BIN/row-fence-ask --descriptor $W/a.json 2>&1|tail -1; echo "  d1 lane-a exit ${PIPESTATUS[0]} (want store_regressed)"; done
for i in 1 2; do ROW_FENCE_SOCKET=$W/s3/sock $BIN/row-fence-ask --descriptor $W/a.json 2>&1|tail -1; echo "  d3 lane-a exit ${PIPESTATUS[0]} (want store_regressed)"; done
