#!/bin/sh
# The stream function's entry point: the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap)
# runs it, waits until GET /health answers, then forwards each function URL request to the port.
PATH=$PATH:$LAMBDA_TASK_ROOT/bin \
PYTHONPATH=$LAMBDA_TASK_ROOT:/opt/python:$PYTHONPATH \
exec python -m uvicorn --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" --lifespan off --no-access-log \
  --app-dir "$LAMBDA_TASK_ROOT" app:app
