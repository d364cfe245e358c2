#!/usr/bin/env bash
# The order-events architecture's local-development setup, with the AWS CLI.
#
# Part 1 is the architecture's `localstack-init/01-queues.sh`, unchanged. Its third command
# subscribes a FIFO queue to a *standard* topic, which AWS refuses ("FIFO SQS Queues can not
# be subscribed to standard SNS topics"); this script requires the endpoint to refuse it
# with that error too, and fails if it is accepted.
# Part 2 is the setup AWS accepts: a FIFO topic, and the four queues of the design's queue
# table subscribed to it, each created with its dead-letter queue.
#
# Usage:
#   local-setup.sh                       # awslocal (PyPI awscli-local), which reads
#                                        # AWS_ENDPOINT_URL (default http://localhost:4566)
#   AWS_CLI="aws --endpoint-url http://127.0.0.1:4566" local-setup.sh    # any aws CLI
#
# Running it again changes nothing (every create is answered with what exists).
set -euo pipefail

read -r -a cli <<<"${AWS_CLI:-awslocal}"
awslocal() { command "${cli[@]}" "$@"; }
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_PAGER=""
export DISABLE_DEPRECATION_NOTICE="${DISABLE_DEPRECATION_NOTICE:-1}"

echo "== part 1: localstack-init/01-queues.sh"
# localstack-init/01-queues.sh -- runs on container start
awslocal sns create-topic --name ecommerce-order-events
awslocal sqs create-queue --queue-name inventory-reservation.fifo \
  --attributes FifoQueue=true,ContentBasedDeduplication=false
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
if awslocal sns subscribe \
  --topic-arn arn:aws:sns:us-east-1:000000000000:ecommerce-order-events \
  --protocol sqs \
  --notification-endpoint arn:aws:sqs:us-east-1:000000000000:inventory-reservation.fifo \
  2>"$errors"; then
  echo "the endpoint subscribed a FIFO queue to a standard topic, which AWS refuses" >&2
  exit 1
fi
cat "$errors"
if ! grep -q "InvalidParameter" "$errors" ||
  ! grep -q "FIFO SQS Queues can not be subscribed to standard SNS topics" "$errors"; then
  echo "the subscribe failed, but not with AWS's error (InvalidParameter: FIFO SQS Queues" \
    "can not be subscribed to standard SNS topics)" >&2
  exit 1
fi
echo "refused as AWS refuses it"

echo "== part 2: a FIFO topic, and the four queues with their dead-letter queues"
account=000000000000
region=us-east-1
topic=arn:aws:sns:$region:$account:ecommerce-order-events.fifo
awslocal sns create-topic --name ecommerce-order-events.fifo --attributes FifoTopic=true
# inventory-reservation.fifo exists already (part 1), made without a RedrivePolicy. AWS
# would take one later (`sqs set-queue-attributes`), Ferry cannot change a queue's
# RedrivePolicy after creation yet (docs/compat/sqs.md), so it keeps none here.
awslocal sns subscribe --topic-arn "$topic" --protocol sqs \
  --notification-endpoint "arn:aws:sqs:$region:$account:inventory-reservation.fifo"

# queue, visibility timeout, retention, max receives -- the design's queue table; every
# dead-letter queue keeps messages 14 days, and a FIFO queue's is FIFO too.
while read -r queue visibility retention max_receives; do
  if [[ $queue == *.fifo ]]; then
    dlq=${queue%.fifo}-dlq.fifo
    fifo='"FifoQueue": "true", '
  else
    dlq=$queue-dlq
    fifo=''
  fi
  awslocal sqs create-queue --queue-name "$dlq" \
    --attributes "{${fifo}\"MessageRetentionPeriod\": \"1209600\"}"
  redrive="{\\\"deadLetterTargetArn\\\":\\\"arn:aws:sqs:$region:$account:$dlq\\\",\\\"maxReceiveCount\\\":\\\"$max_receives\\\"}"
  awslocal sqs create-queue --queue-name "$queue" \
    --attributes "{${fifo}\"VisibilityTimeout\": \"$visibility\", \"MessageRetentionPeriod\": \"$retention\", \"RedrivePolicy\": \"$redrive\"}"
  awslocal sns subscribe --topic-arn "$topic" --protocol sqs \
    --notification-endpoint "arn:aws:sqs:$region:$account:$queue"
done <<'QUEUES'
payment-processing.fifo 60 604800 3
email-notifications 30 345600 5
analytics-ingest 120 1209600 10
QUEUES

awslocal sns list-subscriptions-by-topic --topic-arn "$topic"
echo "local setup done"
