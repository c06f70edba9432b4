#!/bin/sh
# row-fence guard for Claude Code: a PreToolUse hook for the Bash tool.
#
# Every fenced write the agent attempts (git push; gh pr create|merge|edit|close|comment|
# review; gh issue create|edit|close|comment; gh release create; gh api with a method other
# than GET) is asked of the row fence first, in the directory the write would run in.
# Claude Code blocks a tool call ONLY when its hook exits 2; any other non-zero exit lets
# the command run. So the fence's outcomes map to:
#
#   asker exit 0 (ALLOWED, UNFENCED)                     -> exit 0, the command runs
#   asker exit 3 REFUSED, 1 COULD NOT READ, any other    -> exit 2, the verdict line on stderr
#   CUT OFF MID-ASK ("row-fence: asking" and no verdict) -> exit 2, "retry"
#   NEVER RAN (no "row-fence" line at all: no asker,     -> exit 2 when the lane's descriptor
#     not executable, killed before it asked)               visibly exists; else exit 0 with
#                                                           a loud warning (not row-bound)
#
# The fence fails closed: "I could not find out" is never "yes". Commands that write
# nothing fenced pass through untouched (one awk, no asker).
#
# Reading the command is deliberately generous: it is split at ; & | ( ) ` { } and
# newlines even inside quotes, and quotes are dropped, so `bash -c "git push"` and
# `x=$(git push)` are fenced; the price is that a fenced verb quoted in a message
# (git commit -m "a; git push") is asked about too, which an unbound or current lane
# passes anyway. `cd DIR` and `git -C DIR` move where the fence is asked; a directory
# that cannot be read from the text ($VAR, `cd -`) leaves it where it was. A git dir
# named by `git --git-dir DIR` or a `GIT_DIR=DIR` prefix is passed on to the asker as
# GIT_DIR, as git passes it to its own hooks.
#
# Install: `row-fence install claude-hook` (writes this file under $ROW_FENCE_HOME/hooks/
# and the settings entry from hooks/claude-settings.json, whose timeout is longer than
# this hook's own bound). Environment:
#   ROW_FENCE_BIN_DIR              where row-fence-ask is (before PATH); set by the installer
#   ROW_FENCE_HOME, ROW_FENCE_SOCKET  passed on to the asker
#   ROW_FENCE_GUARD_TIMEOUT_MS     the asker's deadline for all asks of one command (5000);
#                                  the hook kills an asker 2 s after it, and the settings'
#                                  timeout (10 s) is above both
#   ROW_FENCE_DESCRIPTOR           an explicit descriptor (the lane is row-bound)
# POSIX sh and the base system's tools only (awk, sed, grep, head, tail, dirname, mktemp,
# sleep; any POSIX awk): it runs under `env -i PATH=/usr/bin:/bin`, on Linux and macOS.

LC_ALL=C
export LC_ALL

ask_timeout_ms=${ROW_FENCE_GUARD_TIMEOUT_MS:-5000}
case $ask_timeout_ms in
  '' | *[!0-9]*) ask_timeout_ms=5000 ;;
esac
# How long after its deadline an asker that has not exited is killed (CUT OFF MID-ASK).
kill_margin_ms=2000

say() {
  printf '%s\n' "$*" >&2
}

# ---------------------------------------------------------------------------------------
# The plan: which fenced writes the command makes, and where. awk reads the hook JSON on
# stdin and prints tab-separated lines: "S <session_id>", then "F <dir> <actions>" for
# each directory a fenced write runs in.
# ---------------------------------------------------------------------------------------
PLAN_AWK='
function unescape(t,    out, n, parts, i, p, c, hex) {
  # t: the inside of a JSON string. Split at backslashes: an empty part is an escaped
  # backslash, any other part starts with the escaped character.
  n = split(t, parts, "\\")
  out = parts[1]
  i = 2
  while (i <= n) {
    p = parts[i]
    if (p == "") {
      out = out "\\"
      if (i + 1 <= n) out = out parts[i + 1]
      i += 2
      continue
    }
    c = substr(p, 1, 1)
    if (c == "n") out = out "\n" substr(p, 2)
    else if (c == "t") out = out "\t" substr(p, 2)
    else if (c == "r") out = out "\r" substr(p, 2)
    else if (c == "b" || c == "f") out = out " " substr(p, 2)
    else if (c == "u") { hex = substr(p, 2, 4); out = out utf8(hexval(hex)) substr(p, 6) }
    else out = out p
    i++
  }
  return out
}
function hexval(h,    i, v, d) {
  v = 0
  h = tolower(h)
  for (i = 1; i <= length(h); i++) {
    d = index("0123456789abcdef", substr(h, i, 1))
    if (d == 0) return 63
    v = v * 16 + d - 1
  }
  return v
}
function utf8(v) {
  # Byte values are printed with %c under LC_ALL=C. Surrogate halves become "?": a
  # command or a path never needs them to be fenced correctly.
  if (v == 0) return "?"
  if (v < 128) return sprintf("%c", v)
  if (v < 2048) return sprintf("%c%c", 192 + int(v / 64), 128 + v % 64)
  if (v >= 55296 && v < 57344) return "?"
  return sprintf("%c%c%c", 224 + int(v / 4096), 128 + int(v / 64) % 64, 128 + v % 64)
}
function parse_json(s,    tok, depth, inobj, key, want_key, v) {
  # A lenient tokenizer: strings, punctuation, bare words. It keeps the key path and
  # picks out session_id, cwd and tool_input.command; what it cannot read, it skips.
  depth = 0
  while (length(s) > 0) {
    # ("]" first and "[" last keep the brackets literal in every awk.)
    if (!match(s, /^[ \t\r\n]*("([^"\\]|\\.)*"|[]{}:,[]|[^] \t\r\n{}:,"[]+)/)) break
    tok = substr(s, RSTART, RLENGTH)
    s = substr(s, RSTART + RLENGTH)
    sub(/^[ \t\r\n]+/, "", tok)
    if (tok == "{") { depth++; inobj[depth] = 1; want_key[depth] = 1; key[depth] = ""; continue }
    if (tok == "[") { depth++; inobj[depth] = 0; key[depth] = ""; continue }
    if (tok == "}" || tok == "]") { if (depth > 0) depth--; continue }
    if (tok == ":") { want_key[depth] = 0; continue }
    if (tok == ",") { if (inobj[depth]) want_key[depth] = 1; continue }
    if (substr(tok, 1, 1) != "\"") continue
    v = unescape(substr(tok, 2, length(tok) - 2))
    if (inobj[depth] && want_key[depth]) { key[depth] = v; continue }
    if (depth == 1 && key[1] == "session_id") session = v
    else if (depth == 1 && key[1] == "cwd") cwd = v
    else if (depth == 2 && key[1] == "tool_input" && key[2] == "command") { command = v; found = 1 }
  }
}
function basename(w) {
  sub(/.*\//, "", w)
  return w
}
function normalize(path,    n, parts, out, i, k, stack) {
  # Lexical, like the shell`s own cd: "." dropped, ".." pops.
  n = split(path, parts, "/")
  k = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "" || parts[i] == ".") continue
    if (parts[i] == "..") { if (k > 0) k--; continue }
    stack[++k] = parts[i]
  }
  out = ""
  for (i = 1; i <= k; i++) out = out "/" stack[i]
  return out == "" ? "/" : out
}
function resolve(dir, target,    home) {
  # The directory `cd target` (or git -C target) moves to from dir; "" when the text
  # does not say (a variable, a substitution, cd -).
  if (target ~ /[$`]/ || target == "-") return ""
  if (target == "~" || substr(target, 1, 2) == "~/") {
    home = ENVIRON["HOME"]
    if (home == "") return ""
    target = home substr(target, 2)
  } else if (substr(target, 1, 1) == "~") return ""
  if (substr(target, 1, 1) != "/") target = dir "/" target
  return normalize(target)
}
function operand(w, i, n) {
  # The first operand from w[i] on, for the ledger: a remote, a number. Flags are
  # skipped (with the value of those that take one); redirections are not operands.
  for (; i <= n; i++) {
    if (w[i] ~ /^(-o|--push-option|--receive-pack|--exec|--repo|-R|-b|--body|-t|--title|-m|--message)$/) { i++; continue }
    if (substr(w[i], 1, 1) == "-") continue
    return (w[i] ~ /^[^<>]+$/ ? " " w[i] : "")
  }
  return ""
}
function fenced(w, n, first,    i, sub1, sub2, method, fields, endpoint, a, dir) {
  # w[first..n]: one simple command. Returns the action text when it is a fenced write,
  # "" otherwise. May set git_dir for `git -C DIR`, and git_repo for `--git-dir DIR`.
  git_dir = ""
  if (basename(w[first]) == "git") {
    for (i = first + 1; i <= n; i++) {
      a = w[i]
      if (a == "-C") { dir = resolve(here, w[i + 1]); if (dir != "") git_dir = dir; i++; continue }
      if (a == "--git-dir") { git_repo = resolve(here, w[i + 1]); i++; continue }
      if (a ~ /^--git-dir=/) { git_repo = resolve(here, substr(a, 11)); continue }
      if (a == "-c" || a == "--work-tree" || a == "--namespace" || a == "--config-env" || a == "--super-prefix") { i++; continue }
      if (substr(a, 1, 1) == "-") continue
      if (a == "push") return "git push" operand(w, i + 1, n)
      return ""
    }
    return ""
  }
  if (basename(w[first]) != "gh") return ""
  for (i = first + 1; i <= n; i++) {
    a = w[i]
    if (a == "-R" || a == "--repo" || a == "--hostname") { i++; continue }
    if (substr(a, 1, 1) == "-") continue
    break
  }
  sub1 = w[i]; sub2 = (i < n ? w[i + 1] : "")
  if (sub1 == "pr" && sub2 ~ /^(create|merge|edit|close|comment|review)$/) return "gh pr " sub2 operand(w, i + 2, n)
  if (sub1 == "issue" && sub2 ~ /^(create|edit|close|comment)$/) return "gh issue " sub2 operand(w, i + 2, n)
  if (sub1 == "release" && sub2 == "create") return "gh release create"
  if (sub1 != "api") return ""
  # gh api: GET unless -X/--method says otherwise; GET becomes POST once a field is given.
  method = ""; fields = 0; endpoint = ""
  for (i = i + 1; i <= n; i++) {
    a = w[i]
    if (a == "-X" || a == "--method") { method = w[i + 1]; i++; continue }
    if (a ~ /^-X./) { method = substr(a, 3); continue }
    if (a ~ /^--method=/) { method = substr(a, 10); continue }
    if (a ~ /^(-f|-F|--field|--raw-field|--input)$/) { fields = 1; i++; continue }
    if (a ~ /^(-f|-F).|^--field=|^--raw-field=|^--input=/) { fields = 1; continue }
    if (a ~ /^(-H|--header|-q|--jq|-t|--template|--hostname|--cache|-p|--preview)$/) { i++; continue }
    if (substr(a, 1, 1) != "-" && endpoint == "") endpoint = a
  }
  method = toupper(method)
  if (method == "") method = (fields ? "POST" : "GET")
  if (method == "GET") return ""
  return "gh api " method (endpoint != "" ? " " endpoint : "")
}
function plan(text,    nseg, segs, s, n, w, first, a, j, act, d) {
  # Split generously (see the header), then read each simple command.
  gsub(/&&|\|\|/, ";", text)
  gsub(/[&|()`{}\n\r]/, ";", text)
  gsub(/["\\'"'"']/, "", text)
  nseg = split(text, segs, ";")
  for (s = 1; s <= nseg; s++) {
    n = split(segs[s], w, /[ \t]+/)
    first = 1
    git_repo = ""
    while (first <= n && w[first] == "") first++
    # Words that run the rest of the line as a command.
    while (first <= n) {
      a = basename(w[first])
      if (w[first] ~ /^GIT_DIR=/) git_repo = resolve(here, substr(w[first], 9))
      if (w[first] ~ /^[A-Za-z_][A-Za-z0-9_]*=/ || a ~ /^(command|builtin|exec|nohup|time|eval|then|do|else|if|while|until|!|-c|-p|--)$/) { first++; continue }
      if (a ~ /^(env|sudo|nice|xargs|timeout|sh|bash|zsh|dash|ksh)$/) {
        first++
        while (first <= n && substr(w[first], 1, 1) == "-") {
          if (w[first] ~ /^(-u|-n|-I|-L|-d|-P|-s|-E|-k|-s|-g)$/ && first < n) first++
          first++
        }
        if (a == "timeout" && w[first] ~ /^[0-9.]+[smhd]?$/) first++
        continue
      }
      break
    }
    if (first > n) continue
    if (w[first] == "cd" || w[first] == "pushd") {
      j = first + 1
      while (j <= n && w[j] ~ /^-[LPe@]*$/ && w[j] != "-") j++
      d = (j <= n && w[j] != "") ? resolve(here, w[j]) : resolve(here, "~")
      if (d != "") here = d
      continue
    }
    act = fenced(w, n, first)
    if (act == "") continue
    d = (git_dir != "" ? git_dir : here) "\t" git_repo
    if (!(d in actions)) { order[++ndirs] = d; actions[d] = act }
    else actions[d] = actions[d] "; " act
  }
}
{ input = input $0 "\n" }
END {
  parse_json(input)
  if (!found) {
    # Not the JSON we expected: read the raw text instead, so a fenced verb in it is
    # still fenced (its punctuation split like separators).
    command = input
    gsub(/[{}\[\],:]/, ";", command)
  }
  if (cwd == "") cwd = ENVIRON["GUARD_PWD"]
  here = normalize(cwd)
  plan(command)
  gsub(/[\t\n]/, " ", session)
  if (session != "") printf "S\t%s\n", session
  for (i = 1; i <= ndirs; i++) {
    a = actions[order[i]]
    split(order[i], where, "\t"); d = where[1]; g = where[2]
    gsub(/[\t\n]/, "?", d); gsub(/[\t\n]/, "?", g); gsub(/[\t\n]/, " ", a)
    if (length(a) > 300) a = substr(a, 1, 300) "..."
    printf "F\t%s\t%s\t%s\n", d, g, a
  }
}'

# ---------------------------------------------------------------------------------------
# Asking: one ask per directory, each bounded by the hook itself.
# ---------------------------------------------------------------------------------------

# The asker this hook runs: ROW_FENCE_BIN_DIR's (the same binaries as the daemon; a
# different build gets stale_code) whenever a file is there, executable or not, so a
# broken install reads as NEVER RAN rather than silently falling back; else PATH's.
find_asker() {
  if [ -n "${ROW_FENCE_BIN_DIR:-}" ] && [ -e "${ROW_FENCE_BIN_DIR}/row-fence-ask" ]; then
    printf '%s\n' "${ROW_FENCE_BIN_DIR}/row-fence-ask"
  else
    command -v row-fence-ask 2>/dev/null
  fi
}

# The directory itself, or its nearest existing ancestor (a directory the command will
# create resolves to where the asker walks up from anyway).
existing_dir() {
  d=$1
  while [ ! -d "$d" ] && [ "$d" != / ] && [ -n "$d" ]; do
    d=$(dirname "$d")
  done
  [ -n "$d" ] || d=/
  printf '%s\n' "$d"
}

# Prints the descriptor a lane in $1 visibly has (the asker's own resolution: an explicit
# ROW_FENCE_DESCRIPTOR, else <git dir>/row-fence.json of the first .git above); fails
# when there is none.
visible_descriptor() {
  if [ -n "${ROW_FENCE_DESCRIPTOR:-}" ]; then
    printf '%s\n' "$ROW_FENCE_DESCRIPTOR"
    return 0
  fi
  if [ -n "$repo" ]; then
    [ -e "$repo/row-fence.json" ] || [ -h "$repo/row-fence.json" ] || return 1
    printf '%s\n' "$repo/row-fence.json"
    return 0
  fi
  d=$1
  while :; do
    if [ -d "$d/.git" ]; then
      [ -e "$d/.git/row-fence.json" ] || return 1
      printf '%s\n' "$d/.git/row-fence.json"
      return 0
    fi
    if [ -e "$d/.git" ]; then
      gitdir=$(sed -n 's/^gitdir:[[:space:]]*//p' "$d/.git" 2>/dev/null | head -n 1)
      case $gitdir in
        '') printf '%s\n' "$d/.git"; return 0 ;; # unreadable: cannot tell, so bound
        /*) ;;
        *) gitdir=$d/$gitdir ;;
      esac
      [ -e "$gitdir/row-fence.json" ] || return 1
      printf '%s\n' "$gitdir/row-fence.json"
      return 0
    fi
    [ "$d" = / ] && return 1
    d=$(dirname "$d")
  done
}

deny() {
  say "$@"
  say "row-fence guard: blocked: $actions (in $dir). Nothing was written."
  exit 2
}

# NEVER RAN: deny a lane that visibly holds a descriptor; let an unbound one through,
# loudly (the instrument is broken, which is not the answer "no": decision of record).
never_ran() {
  if descriptor=$(visible_descriptor "$dir"); then
    deny "row-fence guard: the fence never ran ($1), and this lane is row-bound ($descriptor): denied."
  fi
  say "row-fence guard: WARNING: the fence never ran ($1). No descriptor is visible from $dir, so this lane is taken as not row-bound and '$actions' runs UNFENCED. Fix the row-fence install."
}

ask() {
  dir=$(existing_dir "$1")
  actions=$2
  repo=$3
  if [ -n "$no_asker" ]; then
    never_ran "$no_asker"
    return
  fi
  : >"$err"
  (
    cd "$dir" || exit 125
    if [ -n "$session" ]; then
      ROW_FENCE_SESSION=$session
      export ROW_FENCE_SESSION
    fi
    if [ -n "$repo" ]; then
      GIT_DIR=$repo
      export GIT_DIR
    fi
    exec "$asker" --action "$actions" --timeout-ms "$per_ask_ms" </dev/null >/dev/null 2>"$err"
  ) &
  pid=$!
  # The hook's own bound: an asker past its deadline is killed, so this hook always
  # answers before Claude Code's timeout (which would let the command run).
  (
    sleep "$kill_after" 2>/dev/null
    kill -9 "$pid" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  timer=$!
  wait "$pid"
  status=$?
  kill "$timer" 2>/dev/null

  if [ "$status" -eq 0 ]; then
    return
  fi
  verdict=$(grep '^row-fence: ' "$err" 2>/dev/null | grep -v '^row-fence: asking' | tail -n 1)
  if [ -n "$verdict" ]; then
    deny "$verdict"
  elif grep -q '^row-fence: asking' "$err" 2>/dev/null; then
    deny "row-fence guard: the fence was cut off mid-ask (row-fence-ask exit $status, no verdict); retry."
  elif grep -q '^row-fence-ask: ' "$err" 2>/dev/null; then
    # It ran and said something that is not a verdict (a usage error, an old asker).
    deny "row-fence guard: row-fence-ask failed (exit $status): $(grep '^row-fence-ask: ' "$err" | tail -n 1)"
  else
    never_ran "$asker exited $status without a word"
  fi
}

# A hook input this hook cannot read (awk missing or failing) is not "nothing fenced":
# the fence is asked about the hook's own directory instead, so a row-bound lane is still
# fenced and an unbound one still passes.
if ! plan=$(GUARD_PWD=$(pwd) awk "$PLAN_AWK" 2>/dev/null); then
  say "row-fence guard: could not read the hook input; asking the fence about $(pwd)"
  plan=$(printf 'F\t%s\t\t%s' "$(pwd)" "(a command the guard could not read)")
fi

session=""
tab=$(printf '\t')
dirs=0
while IFS= read -r line; do
  case $line in
    "S$tab"*) session=${line#S"$tab"} ;;
    "F$tab"*) dirs=$((dirs + 1)) ;;
  esac
done <<EOF
$plan
EOF
[ "$dirs" -gt 0 ] || exit 0 # nothing fenced: pass through

asker=$(find_asker)
no_asker=""
[ -n "$asker" ] || no_asker="row-fence-ask is in neither ROW_FENCE_BIN_DIR (${ROW_FENCE_BIN_DIR:-unset}) nor PATH ($PATH)"
# One budget for the whole command, shared by its directories.
per_ask_ms=$((ask_timeout_ms / dirs))
[ "$per_ask_ms" -ge 100 ] || per_ask_ms=100
kill_ms=$((per_ask_ms + kill_margin_ms / dirs))
kill_after=$(printf '%d.%03d' $((kill_ms / 1000)) $((kill_ms % 1000)))

err=$(mktemp "${TMPDIR:-/tmp}/row-fence-guard.XXXXXX" 2>/dev/null) || err=""
# No temp file, no way to read what the asker says: NEVER RAN, for every directory.
[ -n "$err" ] || no_asker="cannot make a temp file in ${TMPDIR:-/tmp} to read row-fence-ask's answer"
trap 'rm -f "$err"' EXIT
trap 'exit 2' HUP INT TERM

while IFS= read -r line; do
  case $line in
    "F$tab"*)
      rest=${line#F"$tab"}
      where=${rest%%"$tab"*}
      rest=${rest#*"$tab"}
      ask "$where" "${rest#*"$tab"}" "${rest%%"$tab"*}"
      ;;
  esac
done <<EOF
$plan
EOF
exit 0
