#!/bin/sh
# Waits (bounded) for the Temporal frontend, then registers the namespace and the search attributes the
# SolveCaptcha workflow upserts (captchaflow.TaskIDKey, captchaflow.PhaseKey), each only if missing.
# Safe to re-run.
#
# Used by docker-compose.yml's temporal-namespace job (temporalio/admin-tools) and by cluster/up.sh. POSIX sh:
# the admin-tools image is not guaranteed to have bash. Needs the `temporal` CLI on PATH.
# Settings: TEMPORAL_ADDRESS (read by the CLI), NAMESPACE (default), NAMESPACE_RETENTION (72h),
# WAIT_SECONDS (60); the Nexus endpoint other teams call captchaflow through: CALLER_NAMESPACE (shop),
# NEXUS_ENDPOINT (captchaflow), TASK_QUEUE (captcha-solve).
set -eu

: "${TEMPORAL_ADDRESS:?set TEMPORAL_ADDRESS}"
export TEMPORAL_ADDRESS
namespace=${NAMESPACE:-default}
retention=${NAMESPACE_RETENTION:-72h}
wait_seconds=${WAIT_SECONDS:-60}
search_attributes="CaptchaTaskId CaptchaPhase CaptchaProvider"

log() { printf 'register-namespace: %s\n' "$*" >&2; }

# until_ok WHAT COMMAND... retries COMMAND every half second for at most WAIT_SECONDS.
until_ok() {
	what=$1
	shift
	deadline=$(($(date +%s) + wait_seconds))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "gave up after ${wait_seconds}s waiting for $what"
			"$@" >&2 || true # show why
			exit 1
		fi
		sleep 0.5
	done
}

until_ok "the Temporal frontend at $TEMPORAL_ADDRESS" temporal operator cluster health

if ! temporal operator namespace describe --namespace "$namespace" >/dev/null 2>&1; then
	log "creating namespace $namespace (retention $retention)"
	temporal operator namespace create --namespace "$namespace" --retention "$retention" >/dev/null
fi

# A new namespace reaches the frontend's cache after a moment.
until_ok "namespace $namespace to be usable" temporal operator search-attribute list --namespace "$namespace"
existing=$(temporal operator search-attribute list --namespace "$namespace" -o json)
for name in $search_attributes; do
	case $existing in
	*"\"$name\""*) continue ;;
	esac
	log "registering search attribute $name (Keyword)"
	temporal operator search-attribute create --namespace "$namespace" --name "$name" --type Keyword >/dev/null
done
log "namespace $namespace is ready with $search_attributes"

# Other teams reach captchaflow from their own namespace through the endpoint (docs/contract.md#nexus).
caller_namespace=${CALLER_NAMESPACE:-shop}
endpoint=${NEXUS_ENDPOINT:-captchaflow}
task_queue=${TASK_QUEUE:-captcha-solve}
if ! temporal operator namespace describe --namespace "$caller_namespace" >/dev/null 2>&1; then
	log "creating the caller namespace $caller_namespace (retention $retention)"
	temporal operator namespace create --namespace "$caller_namespace" --retention "$retention" >/dev/null
fi
if ! temporal operator nexus endpoint get --name "$endpoint" >/dev/null 2>&1; then
	log "creating the Nexus endpoint $endpoint (target $namespace / $task_queue)"
	temporal operator nexus endpoint create --name "$endpoint" --target-namespace "$namespace" --target-task-queue "$task_queue" >/dev/null
fi
