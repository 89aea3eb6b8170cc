"""`sam validate --lint` on the template (aws-sam-cli lives in its own virtualenv: it pins
boto3). scripts/test.sh installs it and sets ERAGRAPH_SAM_CLI; without it the test skips."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def sam_validate(template: Path) -> None:
    sam = os.environ.get("ERAGRAPH_SAM_CLI")
    if not sam or not Path(sam).exists():
        pytest.skip("aws-sam-cli not installed (scripts/test.sh installs it into .venv-sam)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_PROFILE")}
    env.update({"AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0",
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    proc = subprocess.run([sam, "validate", "--lint", "-t", str(template), "--region", "us-east-1"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid SAM Template" in proc.stdout + proc.stderr


def test_sam_validate_lint_is_clean():
    sam_validate(ROOT / "template.yaml")


def test_sam_validate_lint_is_clean_in_the_production_settings(tmp_path):
    """Multi-AZ, fine-grained access, the VPC with its endpoints, JWT (aws_helpers.PRODUCTION)."""
    from aws_helpers import production_template

    sam_validate(production_template(tmp_path))
