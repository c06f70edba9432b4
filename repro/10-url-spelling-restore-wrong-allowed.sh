#!/usr/bin/env bash
# Restore from an old AOF (as repro 01), but the CLI names the same Redis with another spelling
# of its URL than the daemon (localhost vs 127.0.0.1, a trailing slash, /0). The home's floors
# are keyed by the store's description (the URL as written), so the daemon never sees the
# revision the CLI recorded for lane-b's takeover. (With the daemon up, the CLI refuses a write to a
# store spelled unlike the daemon's; the daemon down for the takeover, DOWN=1 default, it goes ahead.) Want: lane-a store_regressed (never ALLOWED).
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-10.XXXXXX); PORT=${PORT:-17611}
CLI_URL=${CLI_URL:-redis://localhost:$PORT}
trap 'kill -9 $RPID $DPID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
mkdir -p $W/r; chmod 700 $W
start_redis() { redis-server --port $PORT --bind 127.0.0.1 --dir $W/r --appendonly yes --appendfsync always \
  --save '' --maxmemory-policy noeviction --logfile $W/r/redis.log & RPID=$!; sleep 0.5; }
start_redis
export ROW_FENCE_HOME=$W/home; mkdir -m 700 -p $ROW_FENCE_HOME
ROW_FENCE_STORE=redis://127.0.0.1:$PORT $BIN/row-fence-resident 2>$W/daemon.log & DPID=$!; sleep 0.5
export ROW_FENCE_STORE=$CLI_URL
ROW_FENCE_STORE=redis://127.0.0.1:$PORT $BIN/row-fence acquire board-1 row-1 --lane lane-a --write-descriptor $W/a.json >/dev/null
$BIN/row-fence-ask --descriptor $W/a.json
redis-cli -p $PORT BGREWRITEAOF >/dev/null; sleep 1; cp -a $W/r/appendonlydir $W/aof-before
if [ "${DOWN:-1}" = 1 ]; then kill $DPID; wait $DPID 2>/dev/null; echo "daemon stopped (a restart, an upgrade) during the takeover"; fi
$BIN/row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor $W/b.json >/dev/null; echo "takeover exit $?"
if [ "${DOWN:-1}" = 1 ]; then ROW_FENCE_STORE=redis://127.0.0.1:$PORT $BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5; fi
[ -n "${NOASK:-}" ] || { $BIN/row-fence-ask --descriptor $W/a.json; echo "lane-a after takeover (want DENIED)"; }
sleep 1.5   # the daemon flushes what its asks saw every second
cat $ROW_FENCE_HOME/revisions.json | tr -d ' \n'; echo
kill -9 $RPID; wait $RPID 2>/dev/null
rm -rf $W/r/appendonlydir; cp -a $W/aof-before $W/r/appendonlydir
start_redis
for i in 1 2 3; do $BIN/row-fence-ask --descriptor $W/a.json; echo "lane-a ask exit $? (0 = WRONG ALLOWED; want 1 store_regressed)"; done
