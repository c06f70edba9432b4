#!/usr/bin/env bash
# File store restored from a backup copy (cp -a over the store, in place) after lane-b's takeover,
# the daemon running; then the same after a daemon restart; then with revisions.json deleted too;
# then the store dir spelled with a trailing slash by the CLI. Want: lane-a never ALLOWED.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-12.XXXXXX); chmod 700 $W
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=${STORE:-file}; mkdir -m 700 -p $ROW_FENCE_HOME
CLI_STORE=${CLI_STORE:-$ROW_FENCE_STORE}; [ "$CLI_STORE" = slash ] && CLI_STORE="file:$ROW_FENCE_HOME/store/"; echo "daemon store $ROW_FENCE_STORE, CLI store $CLI_STORE"
trap 'kill -9 $DPID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
$BIN/row-fence-resident 2>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence acquire board-1 row-1 --lane lane-a --write-descriptor $W/a.json >/dev/null
$BIN/row-fence-ask --descriptor $W/a.json
ls $ROW_FENCE_HOME/store
cp -a $ROW_FENCE_HOME/store $W/backup
if [ "${DOWN:-0}" = 1 ]; then kill $DPID; wait $DPID 2>/dev/null; echo "daemon stopped during the takeover"; fi
ROW_FENCE_STORE=$CLI_STORE $BIN/row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor $W/b.json >/dev/null; echo "takeover exit $?"
if [ "${DOWN:-0}" = 1 ]; then $BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5; fi
[ -n "${NOASK:-}" ] || { $BIN/row-fence-ask --descriptor $W/a.json; echo "lane-a after takeover exit $? (want DENIED)"; }
sleep 1.2
cp -a $W/backup/. $ROW_FENCE_HOME/store/      # restore in place
$BIN/row-fence-ask --descriptor $W/a.json; echo "[running daemon] lane-a exit $? (0 = WRONG ALLOWED)"
$BIN/row-fence check --descriptor $W/a.json 2>&1 | tail -1; echo "[cold check] exit ${PIPESTATUS[0]}"
kill $DPID; wait $DPID 2>/dev/null
$BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence-ask --descriptor $W/a.json; echo "[restarted daemon] lane-a exit $? (0 = WRONG ALLOWED)"
kill $DPID; wait $DPID 2>/dev/null
rm -f $ROW_FENCE_HOME/revisions.json
$BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence-ask --descriptor $W/a.json; echo "[revisions.json deleted, restarted] lane-a exit $? (0 = WRONG ALLOWED)"
ls $ROW_FENCE_HOME/store; tail -c 400 $ROW_FENCE_HOME/store/*log* 2>/dev/null; echo
