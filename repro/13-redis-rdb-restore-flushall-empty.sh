#!/usr/bin/env bash
# Redis standalone durable: (a) restart from an old RDB (then AOF switched on, as an operator
# does), (b) FLUSHALL on the live server, (c) a new empty Redis on the same address.
# Each after lane-b's acknowledged takeover. Want: lane-a never ALLOWED; the same home's
# acquire of the row on the emptied store refused (store_regressed), not handed generation 1 again.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-13.XXXXXX); PORT=${PORT:-17613}
trap 'kill -9 $RPID $DPID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
chmod 700 $W
start_redis() { mkdir -p $W/r; redis-server --port $PORT --bind 127.0.0.1 --dir $W/r --appendonly ${AOF:-yes} --appendfsync always \
  --save '' --maxmemory-policy noeviction --logfile $W/r/redis.log & RPID=$!; sleep 0.5; }
ask() { $BIN/row-fence-ask --descriptor $W/$1.json 2>&1 | tail -1; echo "  $1 exit ${PIPESTATUS[0]} $2"; }
start_redis
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=redis://127.0.0.1:$PORT; mkdir -m 700 -p $ROW_FENCE_HOME
$BIN/row-fence-resident 2>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence acquire board-1 row-1 --lane lane-a --write-descriptor $W/a.json >/dev/null
redis-cli -p $PORT SAVE >/dev/null; cp $W/r/dump.rdb $W/dump-before.rdb
$BIN/row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor $W/b.json >/dev/null; echo "takeover exit $?"
ask a "(want DENIED)"
echo "== (a) restart from the old RDB"
kill -9 $RPID; wait $RPID 2>/dev/null; rm -rf $W/r; mkdir -p $W/r; cp $W/dump-before.rdb $W/r/dump.rdb
AOF=no start_redis; redis-cli -p $PORT CONFIG SET appendonly yes >/dev/null; sleep 1
redis-cli -p $PORT --scan | head -3
ask a "(want store_regressed)"; ask a "(want store_regressed)"; ask b "(want store_regressed)"
echo "== (b) FLUSHALL"
kill -9 $RPID; wait $RPID 2>/dev/null; rm -rf $W/r; start_redis
$BIN/row-fence store accept-regression board-1 2>&1 | tail -1
$BIN/row-fence acquire board-1 row-1 --lane lane-b --write-descriptor $W/b.json >/dev/null; echo "re-acquire lane-b exit $?"; cat $W/b.json; echo
redis-cli -p $PORT FLUSHALL >/dev/null
ask a "(want not ALLOWED)"; ask b "(want store_regressed)"
$BIN/row-fence acquire board-1 row-1 --lane lane-c --write-descriptor $W/c.json 2>&1 | tail -1; echo "  lane-c acquire on emptied store exit ${PIPESTATUS[0]} (want refused)"
echo "== (c) new empty Redis on the same address"
kill -9 $RPID; wait $RPID 2>/dev/null; rm -rf $W/r; start_redis
ask a "(want not ALLOWED)"; ask b "(want store_regressed)"; ask b "(want store_regressed)"
$BIN/row-fence acquire board-1 row-1 --lane lane-c --write-descriptor $W/c.json 2>&1 | tail -1; echo "  lane-c acquire exit ${PIPESTATUS[0]} (want refused)"
$BIN/row-fence check --descriptor $W/b.json 2>&1 | tail -1
