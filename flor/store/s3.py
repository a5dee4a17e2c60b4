"""S3 (or any S3-compatible server) through boto3.

Credentials, region and endpoint come from boto3's usual chain: environment,
profiles, ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``. Every put sends a
SHA-256 the server checks before the object exists (per part for multipart
uploads), and an object becomes visible only when complete, so a reader
never sees half of one. Errors become one-line ``FlorError``s.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from flor.errors import FlorError, StoreUnreachable
from flor.store.base import Store

MULTIPART_BYTES = 64 << 20  # above this, uploads are managed multipart transfers
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
_REFUSED = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "InvalidToken"}
    | {"ExpiredToken", "InvalidClientTokenId"}
)
_BUSY = frozenset(
    {"InternalError", "ServiceUnavailable", "SlowDown", "503", "500", "RequestTimeout"}
)
T = TypeVar("T")


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ("bucket", "some/prefix")."""
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise FlorError("bad-store", f"{url!r} names no bucket: use s3://BUCKET[/PREFIX]")
    return bucket, prefix.strip("/")


class S3Store(Store):
    def __init__(self, url: str) -> None:
        self.bucket, self.prefix = parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self._root = f"{self.prefix}/" if self.prefix else ""
        config = Config(
            retries={"mode": "standard", "max_attempts": 5},
            connect_timeout=5,
            read_timeout=60,
            max_pool_connections=16,
        )
        self.client = boto3.session.Session().client("s3", config=config)
        self.endpoint = self.client.meta.endpoint_url
        self._transfer = TransferConfig(
            multipart_threshold=MULTIPART_BYTES, multipart_chunksize=16 << 20
        )

    def check(self) -> S3Store:
        """Fail now, in one line, if the bucket is missing or the credentials are refused."""
        self._call(None, lambda: self.client.head_bucket(Bucket=self.bucket))
        return self

    # -- the contract --------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        obj = self._object(key)
        if len(data) <= MULTIPART_BYTES:
            digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
            self._call(
                key,
                lambda: self.client.put_object(
                    Bucket=self.bucket, Key=obj, Body=data, ChecksumSHA256=digest
                ),
            )
        else:
            self._call(
                key,
                lambda: self.client.upload_fileobj(
                    io.BytesIO(data),
                    self.bucket,
                    obj,
                    ExtraArgs={"ChecksumAlgorithm": "SHA256"},
                    Config=self._transfer,
                ),
            )

    def get(self, key: str) -> bytes:
        obj = self._object(key)
        response = self._call(
            key,
            lambda: self.client.get_object(Bucket=self.bucket, Key=obj, ChecksumMode="ENABLED"),
        )
        body: bytes = self._call(key, response["Body"].read)
        return body

    def exists(self, key: str) -> bool:
        try:
            self._head(key)
        except KeyError:
            return False
        return True

    def keys(self, prefix: str) -> Iterator[str]:
        found: list[str] = []
        for page in self._pages(prefix, delimiter=False):
            found.extend(o["Key"][len(self._root) :] for o in page.get("Contents", []))
        yield from sorted(found)

    def sizes(self, prefix: str) -> dict[str, int]:
        return {
            o["Key"][len(self._root) :]: int(o["Size"])
            for page in self._pages(prefix, delimiter=False)
            for o in page.get("Contents", [])
        }

    def children(self, prefix: str) -> list[str]:
        names: set[str] = set()
        base = len(self._folder(prefix))
        for page in self._pages(prefix, delimiter=True):
            names.update(o["Key"][base:] for o in page.get("Contents", []))
            for p in page.get("CommonPrefixes", []):  # some servers list emptied folders too
                if self._any(p["Prefix"]):
                    names.add(p["Prefix"][base:].rstrip("/"))
        return sorted(names)

    def _any(self, folder: str) -> bool:
        listed = self._call(
            None, lambda: self.client.list_objects_v2(Bucket=self.bucket, Prefix=folder, MaxKeys=1)
        )
        return bool(listed.get("Contents"))

    def delete(self, key: str) -> None:
        obj = self._object(key)
        self._call(key, lambda: self.client.delete_object(Bucket=self.bucket, Key=obj))

    def size(self, key: str) -> int:
        return int(self._head(key)["ContentLength"])

    def holds(self, key: str, data: bytes) -> bool:
        """Compare size and the SHA-256 the server checked on upload, without downloading."""
        try:
            head = self._head(key)
        except KeyError:
            return False
        if head["ContentLength"] != len(data):
            return False
        stored = head.get("ChecksumSHA256")
        if stored is None:  # a server that keeps no checksums: compare the bytes themselves
            return super().holds(key, data)
        if "-" in stored:  # multipart: the server verified each part's SHA-256 on upload
            return True
        return bool(stored == base64.b64encode(hashlib.sha256(data).digest()).decode())

    # -- helpers ---------------------------------------------------------------------
    def _object(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad store key {key!r}")
        return self._root + key

    def _folder(self, prefix: str) -> str:
        return self._root + (prefix.strip("/") + "/" if prefix.strip("/") else "")

    def _head(self, key: str) -> dict[str, Any]:
        obj = self._object(key)
        head: dict[str, Any] = self._call(
            key,
            lambda: self.client.head_object(Bucket=self.bucket, Key=obj, ChecksumMode="ENABLED"),
        )
        return head

    def _pages(self, prefix: str, delimiter: bool) -> Iterator[dict[str, Any]]:
        paginator = self.client.get_paginator("list_objects_v2")
        args = {"Bucket": self.bucket, "Prefix": self._folder(prefix)}
        if delimiter:
            args["Delimiter"] = "/"
        pages = self._call(None, lambda: list(paginator.paginate(**args)))
        yield from pages

    def _call(self, key: str | None, fn: Callable[[], T]) -> T:
        """Run one boto3 call; missing keys become KeyError, the rest one-line errors."""
        try:
            return fn()
        except botocore.exceptions.ClientError as e:
            error = e.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in _MISSING and key is not None:
                raise KeyError(key) from None
            if code in {"NoSuchBucket", "404"}:
                raise FlorError(
                    "s3-no-bucket", f"S3 bucket {self.bucket!r} does not exist at {self.endpoint}"
                ) from None
            if code in _BUSY:  # botocore already retried: treat as down for now
                raise StoreUnreachable(
                    self.endpoint or self.url, f"{code} on {key or self.url}"
                ) from None
            if code in _REFUSED:
                raise FlorError(
                    "s3-credentials",
                    f"S3 at {self.endpoint} refused the credentials ({code}); check "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE",
                ) from None
            raise FlorError(
                "s3", f"S3 {code or 'error'} on {key or self.url}: {error.get('Message', e)}"
            ) from None
        except botocore.exceptions.NoCredentialsError:
            raise FlorError(
                "s3-credentials",
                f"no AWS credentials for {self.url}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
            ) from None
        except (botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError) as e:
            raise StoreUnreachable(self.endpoint or self.url, type(e).__name__) from None
