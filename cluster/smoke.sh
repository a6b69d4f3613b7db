#!/usr/bin/env bash
# Smoke test of the local cluster: brings it up detached, proves the namespace, both search attributes and SQL
# visibility work end to end (start a workflow tagged with CaptchaTaskId, find it by a visibility query, terminate
# it), proves a second `up` is a quick no-op, then brings it down and checks nothing it started is left running.
# Exits non-zero on the first failure, and always runs down.sh.
set -euo pipefail

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pass=0
fail=0
check() {
	local what=$1
	shift
	if "$@" >/dev/null; then
		pass=$((pass + 1))
		log "ok: $what"
	else
		fail=$((fail + 1))
		log "FAIL: $what"
	fi
}

teardown() {
	"$CLUSTER_DIR/down.sh" || fail=$((fail + 1))
}
trap teardown EXIT

started=$SECONDS
"$CLUSTER_DIR/up.sh" --detach
log "up took $((SECONDS - started))s"

check "namespace $NAMESPACE exists" temporal_cli operator namespace describe --namespace "$NAMESPACE" -o json
attrs=$(temporal_cli operator search-attribute list --namespace "$NAMESPACE" -o json)
for name in "${SEARCH_ATTRIBUTES[@]}"; do
	# shellcheck disable=SC2016 # $n is jq's variable
	check "search attribute $name is a Keyword" \
		jq -e --arg n "$name" '.customAttributes[$n] == "INDEXED_VALUE_TYPE_KEYWORD"' <<<"$attrs"
done

# A workflow without a worker is enough: visibility records it as soon as it starts.
workflow_id="cluster-smoke-$$-$RANDOM"
task_id="smoke$RANDOM$RANDOM"
check "start a workflow tagged CaptchaTaskId=$task_id" temporal_cli workflow start --namespace "$NAMESPACE" \
	--type SolveCaptcha --task-queue cluster-smoke --workflow-id "$workflow_id" \
	--search-attribute "CaptchaTaskId=\"$task_id\"" --search-attribute 'CaptchaPhase="submitting"' -o json
found_by_query() {
	temporal_cli workflow list --namespace "$NAMESPACE" --query "CaptchaTaskId = '$task_id'" -o json |
		jq -e --arg id "$workflow_id" 'map(select(.execution.workflowId == $id)) | length == 1'
}
# Visibility is eventually consistent; bounded poll, no fixed sleep.
check "visibility query by CaptchaTaskId finds it" wait_until "the workflow to show in visibility" 20 found_by_query
check "terminate it" temporal_cli workflow terminate --namespace "$NAMESPACE" --workflow-id "$workflow_id" \
	--reason "cluster smoke test"

started=$SECONDS
"$CLUSTER_DIR/up.sh" --detach >/dev/null
check "a second up is a no-op that takes under 10s ($((SECONDS - started))s)" test $((SECONDS - started)) -lt 10

trap - EXIT
teardown
leftovers() {
	local data
	data=$(pg_data_dir)
	! pid_alive "$SERVER_PID_FILE" temporal-server &&
		! pg_ctl_status "$data" >/dev/null 2>&1 &&
		! port_in_use "$CLUSTER_FRONTEND_PORT" && ! port_in_use "$CLUSTER_PG_PORT"
}
check "down leaves nothing running" leftovers

echo "cluster smoke: $pass passed, $fail failed"
((fail == 0))
