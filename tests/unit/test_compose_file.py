"""docker-compose.yml and the Dockerfile agree with the code they run (there is no Docker engine to try them here).

The compose file is validated against the Compose Specification's JSON schema (the copy the check-jsonschema package
ships), and the Dockerfile installs only what pyproject.toml declares, at its pins.

The app service runs examples/kafka_to_lake.py: every variable it sets must be one the example reads, every
variable the example is configured by must be set, and each value must point at a service of the file with the
ports, credentials and bucket that service really has.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
EXAMPLE = ROOT / "examples" / "kafka_to_lake.py"
FEED_EXAMPLE = ROOT / "examples" / "change_feed.py"
# What the example is configured by (its docstring's table); the S3 variables are read by s3fs and the example.
EXAMPLE_ENV = {"KAFKA_BOOTSTRAP", "KAFKA_TOPIC", "DUCKLAKE_CATALOG", "DUCKLAKE_DATA_PATH"}
S3_ENV = {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as strings, from either spelling (mapping or ``KEY=value`` list)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def host_ports(service: dict[str, Any]) -> dict[int, int]:
    """``{container port: host port}`` of the short ``"host:container"`` syntax."""
    ports = {}
    for spec in service.get("ports", []):
        host, container = str(spec).split(":")[-2:]  # "[ip:]host:container"
        ports[int(container)] = int(host)
    return ports


def example_strings(path: Path = EXAMPLE) -> set[str]:
    """Every string literal in the example's source (environment variable names among them)."""
    tree = ast.parse(path.read_text())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def example_env_reads(path: Path = EXAMPLE) -> set[str]:
    """Names the example passes to ``os.environ.get(...)`` or lists in its S3_ENV tuple."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and ast.unparse(node.func.value) == "os.environ"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "S3_ENV" for t in node.targets):
            names |= {e.value for e in node.value.elts}  # type: ignore[attr-defined]
    return names


def load_example(path: Path = EXAMPLE) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return sys.modules[spec.name]


def test_services_exist(services: dict[str, Any]) -> None:
    assert {"postgres", "kafka", "minio", "minio-init", "app"} <= set(services)


def test_images_are_pinned(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "build" in service:
            continue
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), f"{name}: unpinned image {image}"
    assert services["kafka"]["image"].startswith("apache/kafka:4.")


def test_ports(services: dict[str, Any]) -> None:
    assert host_ports(services["postgres"]) == {5432: 5432}
    assert host_ports(services["minio"])[9000] == 9000
    kafka_env = env_of(services["kafka"])
    # The host listener is published on the port it advertises, so host clients reach what they are told.
    advertised = dict(item.split("://", 1) for item in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    host, port = advertised["HOST"].rsplit(":", 1)
    assert host == "localhost" and host_ports(services["kafka"]) == {int(port): int(port)}


def test_kafka_is_a_single_kraft_node(services: dict[str, Any]) -> None:
    env = env_of(services["kafka"])
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    listeners = dict(item.split("://", 1) for item in env["KAFKA_LISTENERS"].split(","))
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) == set(protocols)
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners
    voter_port = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].rsplit(":", 1)[1]
    assert listeners[env["KAFKA_CONTROLLER_LISTENER_NAMES"]].endswith(f":{voter_port}")
    for key, value in env.items():
        if key.endswith(("REPLICATION_FACTOR", "MIN_ISR")):
            assert value == "1", key
    volume = next(v for v in services["kafka"]["volumes"] if v.endswith(":" + env["KAFKA_LOG_DIRS"]))
    assert volume


def test_app_env_is_what_the_example_reads(services: dict[str, Any]) -> None:
    app_env = set(env_of(services["app"]))
    reads = example_env_reads()
    strings = example_strings()
    assert EXAMPLE_ENV | S3_ENV <= reads, "the example no longer reads a variable this test expects"
    assert app_env <= reads and app_env <= strings, f"set but never read: {sorted(app_env - reads)}"
    assert reads <= app_env, f"the example reads variables the app does not set: {sorted(reads - app_env)}"


def test_app_env_points_at_the_services(services: dict[str, Any]) -> None:
    env = env_of(services["app"])
    host, port = env["KAFKA_BOOTSTRAP"].split(":")
    kafka_listeners = env_of(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"]
    assert host == "kafka" and f"://kafka:{port}" in kafka_listeners

    pg = env_of(services["postgres"])
    url = urlparse(env["DUCKLAKE_CATALOG"])
    assert url.scheme == "postgresql+psycopg2" and url.hostname == "postgres" and url.port == 5432
    assert (url.username, url.password, url.path.lstrip("/")) == (
        pg["POSTGRES_USER"],
        pg["POSTGRES_PASSWORD"],
        pg["POSTGRES_DB"],
    )

    minio = env_of(services["minio"])
    endpoint = urlparse(env["AWS_ENDPOINT_URL"])
    assert endpoint.hostname == "minio" and endpoint.port == 9000
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
        minio["MINIO_ROOT_USER"],
        minio["MINIO_ROOT_PASSWORD"],
    )
    data = urlparse(env["DUCKLAKE_DATA_PATH"])
    assert data.scheme == "s3" and env["DUCKLAKE_DATA_PATH"].endswith("/")
    init = " ".join(services["minio-init"]["command"])
    assert f"mb --ignore-existing local/{data.hostname}" in init  # the one-shot service creates that bucket
    assert "http://minio:9000" in init and f"{minio['MINIO_ROOT_USER']} {minio['MINIO_ROOT_PASSWORD']}" in init


def test_app_waits_for_its_services(services: dict[str, Any]) -> None:
    depends = services["app"]["depends_on"]
    assert set(depends) == {"postgres", "kafka", "minio-init"}
    for name, rule in depends.items():
        if rule["condition"] == "service_healthy":
            assert "healthcheck" in services[name], name
    assert depends["minio-init"]["condition"] == "service_completed_successfully"


def test_app_command_runs_the_example(compose: dict[str, Any], services: dict[str, Any]) -> None:
    command = services["app"]["command"]
    command = shlex.split(command) if isinstance(command, str) else command
    assert command[:2] == ["python", "examples/kafka_to_lake.py"]
    args = load_example().build_parser().parse_args(command[2:])  # SystemExit on an unknown flag
    assert args.produce and args.pipeline
    # The checkpoint outlives the container, on a named volume.
    mounts = dict(v.split(":", 1)[::-1] for v in services["app"]["volumes"])
    mount = next(m for m in mounts if args.checkpoint.startswith(m + "/"))
    assert mounts[mount] in compose["volumes"]


def test_dockerfile_builds_the_app(services: dict[str, Any]) -> None:
    build = services["app"]["build"]
    context = build if isinstance(build, str) else build.get("context", ".")
    assert (ROOT / context / "Dockerfile").resolve() == DOCKERFILE
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim(-\w+)?$", text, re.M)
    assert "openjdk-17-jre-headless" in text
    extras = _optional_dependency_groups((ROOT / "pyproject.toml").read_text())
    wanted = re.search(r'pip install[^\n]*"\.\[([a-z0-9,]+)\]"', text)
    assert wanted and {"postgres", "kafka", "s3"} <= set(wanted.group(1).split(",")) <= extras
    assert "scripts/kafka.sh fetch spark" in text  # Spark's Kafka source is in the image
    for copied in re.findall(r"^COPY (\S+)", text, re.M):
        if not copied.startswith("--"):
            assert (ROOT / copied).exists(), copied


def test_feed_follows_the_apps_lake(compose: dict[str, Any], services: dict[str, Any]) -> None:
    """The feed service runs examples/change_feed.py on the lake the app writes, configured by what it reads."""
    feed, app = env_of(services["feed"]), env_of(services["app"])
    reads = example_env_reads(FEED_EXAMPLE)
    assert {"DUCKLAKE_CATALOG", "CHANGE_FEED_STARTING_SNAPSHOT", "CHANGE_FEED_CHECKPOINT"} <= reads
    assert set(feed) - S3_ENV <= reads, f"set but never read: {sorted(set(feed) - S3_ENV - reads)}"
    # Same catalog and object store as the app (the data path itself comes from the catalog).
    for name in {"DUCKLAKE_CATALOG"} | S3_ENV:
        assert feed[name] == app[name], name
    assert "DUCKLAKE_DATA_PATH" not in reads
    assert set(services["feed"]["depends_on"]) == {"postgres", "minio-init"}
    assert services["feed"]["build"] == services["app"]["build"]

    command = services["feed"]["command"]
    command = shlex.split(command) if isinstance(command, str) else command
    assert command[:2] == ["python", "examples/change_feed.py"]
    args = load_example(FEED_EXAMPLE).build_parser().parse_args(command[2:])  # SystemExit on an unknown flag
    # Unbounded (it follows the table), and its checkpoint outlives the container on a named volume apart from
    # the app's.
    assert not (args.available_now or args.max_seconds or args.max_changes)
    mounts = dict(v.split(":", 1)[::-1] for v in services["feed"]["volumes"])
    checkpoint = feed["CHANGE_FEED_CHECKPOINT"]
    mount = next(m for m in mounts if checkpoint.startswith(m + "/"))
    assert mounts[mount] in compose["volumes"]
    app_args = load_example().build_parser().parse_args(services["app"]["command"][2:])
    assert not app_args.checkpoint.startswith(checkpoint) and not checkpoint.startswith(app_args.checkpoint)


def _optional_dependency_groups(pyproject: str) -> set[str]:
    """The names of ``[project.optional-dependencies]`` (tomllib is 3.11+, and the package supports 3.10)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return set(tomllib.loads(pyproject)["project"]["optional-dependencies"])
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", section, re.M))


# --- the Compose Specification's schema, and what the images install -----------------------------------------------


def compose_schema_validator() -> Any:
    """A validator of the Compose Specification's JSON schema, as the check-jsonschema package ships it
    (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``, vendored from the compose-spec project)."""
    import json
    from importlib import resources

    import jsonschema

    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    schema = json.loads(text)
    assert schema["title"] == "Compose Specification"
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_compose_file_follows_the_compose_specification(compose: dict[str, Any]) -> None:
    """What `docker compose config` would check first, without a Docker engine: the file against the spec's schema."""
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in compose_schema_validator().iter_errors(compose)
    ]
    assert errors == []


def test_the_schema_check_refuses_what_compose_would(compose: dict[str, Any]) -> None:
    """The check bites: a misspelt key, a wrong type and an unknown depends_on condition are each refused."""
    validator = compose_schema_validator()
    app = compose["services"]["app"]
    for broken in (
        {**app, "depend_on": app["depends_on"]},
        {**app, "ports": "8080"},
        {**app, "depends_on": {"postgres": {"condition": "service_ready"}}},
    ):
        bad = {**compose, "services": {**compose["services"], "app": broken}}
        assert list(validator.iter_errors(bad)), broken


def test_kafka_image_is_the_broker_the_tests_run(services: dict[str, Any]) -> None:
    """The image's Kafka release is the one scripts/kafka.sh fetches from Maven Central and the tests run natively,
    so the tag names a release that exists."""
    default = re.search(
        r'^KAFKA_VERSION="\$\{KAFKA_VERSION:-([0-9.]+)\}"', (ROOT / "scripts" / "kafka.sh").read_text(), re.M
    )
    assert default and services["kafka"]["image"] == f"apache/kafka:{default.group(1)}"


def _pip_installs(dockerfile: str) -> list[str]:
    """Every requirement the Dockerfile's `pip install` commands name (continuation lines joined)."""
    text = dockerfile.replace("\\\n", " ")
    found: list[str] = []
    for line in re.findall(r"pip install ([^\n&;]+)", text):
        found += [w.strip("\"'") for w in line.split() if not w.startswith("-")]
    return found


def _declared_requirements(pyproject: str) -> dict[str, str]:
    """Every requirement pyproject.toml states (dependencies, extras, groups), by lower-case name."""
    reqs = re.findall(r'^\s*"([A-Za-z0-9][A-Za-z0-9._\[\],-]*[^"]*)"', pyproject, re.M)
    return {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower(): r for r in reqs}


def test_dockerfile_installs_what_pyproject_declares() -> None:
    """The image installs the package from pyproject.toml with extras it declares, and any other package only at
    the exact version pyproject.toml pins for it (DuckDB and its extension wheels: the test group's pins)."""
    installs = _pip_installs(DOCKERFILE.read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    declared = _declared_requirements(pyproject)
    extras = _optional_dependency_groups(pyproject)
    package = [r for r in installs if r.startswith(".[")]
    assert len(package) == 1 and set(package[0][2:-1].split(",")) <= extras, installs
    others = [r for r in installs if not r.startswith(".")]
    assert others, installs
    for req in others:
        name = re.split(r"[\[<>=!~]", req, maxsplit=1)[0].lower()
        assert name in declared, f"the Dockerfile installs {req}, which pyproject.toml does not declare"
        assert "==" in req and declared[name] == req, f"the Dockerfile pins {req}, pyproject.toml {declared[name]}"
