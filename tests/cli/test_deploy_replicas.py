"""deploy/ for several replicas: the local start/stop script runs N replicas on one
PostgreSQL database that clients reach through one address list; the compose file and the
Kubernetes manifests parse and keep the systemd unit's hardening (no cluster or container
engine runs here: `docker compose config` is checked only where it works)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.serving import cli_env, run_cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TOKEN = "replicas-token"


def replicas_sh(*args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(TOKEN, LDPCOLLECT=f"{sys.executable} -m ldpcollect_cli.main")
    return subprocess.run(
        ["bash", str(DEPLOY / "replicas" / "replicas.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_script_starts_replicas_that_share_one_database_and_stops_them(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    started = replicas_sh("start", fresh_postgres_url, "2", "0", str(run_dir))
    assert started.returncode == 0, started.stderr
    server = started.stdout.strip()
    pids = [int(p.read_text()) for p in sorted(run_dir.glob("replica-*.pid"))]
    try:
        assert len(server.split(",")) == 2 and len(pids) == 2
        run_cli(
            TOKEN, "query", "create", "--id", "rr", "--mechanism", "rr", "--flip1", "0.85",
            "--flip2", "0.3", "--bbox", "48.85,2.28,48.87,2.31", "--scheme", "h3:8",
            server=server,
        )  # fmt: skip
        fleet = ("fleet", "run", "--query", "rr", "--devices", "300", "--no-progress", "--json")
        done = json.loads(run_cli(TOKEN, *fleet, server=server).stdout)
        assert done["rounds"][0]["accepted"] == 300
    finally:
        stopped = replicas_sh("stop", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped 2 replica(s)" in stopped.stderr
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_script_says_what_it_needs() -> None:
    done = replicas_sh("start")
    assert done.returncode == 2 and "usage:" in done.stderr


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_kubernetes_replicas_are_a_hardened_deployment_behind_a_headless_service() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for p in (DEPLOY / "k8s").glob("*.yaml")
            for d in _documents(p)}  # fmt: skip
    service = docs[("Service", "ldpcollect-aggregator")]
    assert service["spec"]["clusterIP"] == "None"
    deployment = docs[("Deployment", "ldpcollect-aggregator")]
    pod = deployment["spec"]["template"]["spec"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["args"][0] == "serve"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    secret = docs[("Secret", "ldpcollect-aggregator")]
    for ref in env.values():
        assert ref["name"] == "ldpcollect-aggregator" and ref["key"] in secret["stringData"]
    assert set(env) == {"LDPCOLLECT_ADMIN_TOKEN", "LDPCOLLECT_STORE"}
    assert docs[("Service", "ldpcollect-postgres")]["spec"]["type"] == "ExternalName"
    job = docs[("Job", "ldpcollect-migrate")]["spec"]["template"]["spec"]
    assert job["containers"][0]["args"] == ["store", "migrate"]


def test_compose_runs_hardened_replicas_after_the_migration() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    replicas = [s for name, s in compose["services"].items() if name.startswith("replica-")]
    assert len(replicas) == 3
    for service in replicas:
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
        assert service["security_opt"] == ["no-new-privileges:true"]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert service["ports"][0].startswith("127.0.0.1:")
    assert compose["services"]["migrate"]["command"] == ["store", "migrate"]


@pytest.mark.skipif(
    shutil.which("docker") is None
    or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0,
    reason="docker compose is not installed here",
)
def test_docker_compose_accepts_the_file() -> None:
    done = subprocess.run(
        ["docker", "compose", "-f", str(DEPLOY / "compose" / "compose.yaml"), "config", "-q"],
        env={**os.environ, "LDPCOLLECT_ADMIN_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
