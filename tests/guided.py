"""Sample requests with the guidance options spelled as ``genodiff sample`` spells them, for
tests that sweep them (the request carries them grouped, as one ``Guidance``)."""

from genodiff.guidance import Guidance
from genodiff.samplers.request import SampleRequest


def request(
    num_samples: int,
    length: int,
    *,
    label: int | None = None,
    guidance: float = 1.0,
    guidance_schedule: str = "constant",
    classifier=None,
    classifier_form: str = "first-order",
    guidance_form: str | None = None,
    **options,
) -> SampleRequest:
    """A ``SampleRequest``; with a ``label``, guided by those settings."""
    steer = None
    if label is not None:
        steer = Guidance(
            label, guidance, guidance_schedule, classifier, classifier_form, form=guidance_form
        )
    return SampleRequest(num_samples, length, guidance=steer, **options)
