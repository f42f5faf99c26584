"""`ServedModel` runs an export as the stock model server does, XLA compilation off: a graph
that needs XLA fails in it as it would in the server, and XLA is on again for the rest of the
process afterwards."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("tensorflow_text")


class _NeedsXla(tf.Module):
    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None], tf.float32)])
    def double(self, x):
        return {"y": x * 2.0}


@pytest.fixture(scope="module")
def needs_xla(tmp_path_factory):
    module = _NeedsXla()
    path = tmp_path_factory.mktemp("export") / "1"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.double})
    return path


def test_a_graph_that_needs_xla_fails_as_in_the_server(needs_xla):
    from zoo.serving.session import ServedModel

    served = ServedModel(needs_xla)
    with pytest.raises(tf.errors.OpError, match="XLA compilation disabled"):
        served(x=[1.0, 2.0])
    # The rest of the process compiles with XLA as before.
    assert tf.function(lambda x: x + 1.0, jit_compile=True)(tf.ones([2])).numpy().tolist() \
        == [2.0, 2.0]
    assert ServedModel(needs_xla, xla=True)(x=[1.0, 2.0])["y"].tolist() == [2.0, 4.0]
