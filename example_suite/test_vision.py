import pytest


@pytest.mark.goodput(scenario="concurrency", concurrency=4, requests=32, api="chat", isl=64, osl=16,
                     images_per_request=[1, 2], image_size=["336x336", "448x448"],
                     gate=["metrics.ttft_ms.p50", "metrics.e2e_ms.p50"], tolerance=0.2)
def test_vision_requests(goodput):
    result = goodput.run()
    assert result.metrics.images.mean > 1
