"""klog text lines as kubelet v1.37.1 writes them (copied from a make e2e kubelet log)."""

from __future__ import annotations

from pathlib import Path

from draflow_testenv import klog

REGISTERED = (
    'I1124 16:00:31.855629   12414 dra_plugin_manager.go:444] "Registered DRA plugin" '
    'logger="DRA registration handler" driverName="gpu.draflow.example" '
    'endpoint="/tmp/draflow-node-bce55e/kubelet/plugins/gpu.draflow.example/dra.sock" '
    'chosenService="v1.DRAPlugin" numPlugins=1'
)
PREPARED = (
    'I1124 16:00:39.754853   12414 dra_plugin.go:116] "Done calling NodePrepareResources rpc" '
    'logger="dra-plugin" driverName="gpu.draflow.example" endpoint="/tmp/n/dra.sock" '
    'response="claims:{key:\\"1838574f\\" value:{devices:{request_names:\\"gpu\\" pool_name:\\"n1\\" '
    'device_name:\\"gpu-0\\" cdi_device_ids:\\"gpu.draflow.example/gpu=1838574f-gpu-0\\"}}}" err=null'
)
PLUGIN = (
    'I1124 16:00:31.847709   12414 reconciler.go:161] "OperationExecutor.RegisterPlugin started" '
    'plugin={"SocketPath":"/tmp/x/gpu.draflow.example-reg.sock","Name":"a b","Handler":null} next="x"'
)


def test_a_registration_line_gives_its_message_and_values() -> None:
    rec = klog.parse(REGISTERED)
    assert rec is not None
    assert (rec.severity, rec.source) == ("I", "dra_plugin_manager.go:444")
    assert rec.message == "Registered DRA plugin"
    assert rec.values == {
        "logger": "DRA registration handler", "driverName": "gpu.draflow.example",
        "endpoint": "/tmp/draflow-node-bce55e/kubelet/plugins/gpu.draflow.example/dra.sock",
        "chosenService": "v1.DRAPlugin", "numPlugins": "1",
    }


def test_quoted_values_are_unquoted_and_bare_values_kept() -> None:
    rec = klog.parse(PREPARED)
    assert rec is not None
    assert rec.values["response"].startswith('claims:{key:"1838574f" value:{devices:{request_names:"gpu"')
    assert rec.values["err"] == "null"


def test_a_json_value_with_spaces_is_one_value() -> None:
    rec = klog.parse(PLUGIN)
    assert rec is not None
    assert rec.values["plugin"] == ('{"SocketPath":"/tmp/x/gpu.draflow.example-reg.sock",'
                                    '"Name":"a b","Handler":null}')
    assert rec.values["next"] == "x"


def test_go_escapes() -> None:
    rec = klog.parse('E0101 00:00:00.000001       1 x.go:1] "a\\tb" k="\\x41\\u00e9\\"q\\"\\\\" n=2')
    assert rec is not None
    assert rec.message == "a\tb"
    assert rec.values == {"k": 'Aé"q"\\', "n": "2"}


def test_other_lines_are_not_records() -> None:
    for line in ("", "Flag --foo has been deprecated", 'I1124 16:00:31.855629   1 x.go:1] unstructured text',
                 'I1124 16:00:31.855629   1 x.go:1] "unterminated'):
        assert klog.parse(line) is None


def test_records_filters_by_message_and_values(tmp_path: Path) -> None:
    log = tmp_path / "kubelet.log"
    other = REGISTERED.replace("gpu.draflow.example", "other.example")
    log.write_text("\n".join([PLUGIN, REGISTERED, "garbage", other, PREPARED]) + "\n")
    assert len(klog.records(log, "Registered DRA plugin")) == 2
    [mine] = klog.records(log, "Registered DRA plugin", driverName="gpu.draflow.example")
    assert mine.values["chosenService"] == "v1.DRAPlugin"
    assert klog.records(log, "Done calling NodePrepareResources rpc", err="null")
    assert not klog.records(log, "Done calling NodePrepareResources rpc", err="boom")
