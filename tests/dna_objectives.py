"""The objectives with the DNA tokenizer's ids, as a DNA config builds them (the ids are
required arguments: the core takes them from the run's tokenizer)."""

from genodiff.objectives import AR, D3PM, MDLM, SEDD, Plaid
from genodiff.tokenizers import DNATokenizer

DNA = DNATokenizer()
IDS = {"mask_id": DNA.mask_id, "pad_id": DNA.pad_id}


def mdlm(**kwargs) -> MDLM:
    return MDLM(**IDS, **kwargs)


def sedd(**kwargs) -> SEDD:
    return SEDD(**IDS, **kwargs)


def d3pm(**kwargs) -> D3PM:
    return D3PM(**IDS, **kwargs)


def ar(**kwargs) -> AR:
    return AR(bos_id=DNA.bos_id, pad_id=DNA.pad_id, sample_ids=DNA.sample_ids, **kwargs)


def plaid(**kwargs) -> Plaid:
    return Plaid(token_ids=DNA.sample_ids, pad_id=DNA.pad_id, **kwargs)
