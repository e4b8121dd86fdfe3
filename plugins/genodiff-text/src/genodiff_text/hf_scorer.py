"""Gen PPL as the MDLM paper measures it: text samples scored by a Hugging Face causal LM
(``genodiff gen-ppl SAMPLES --scorer hf [--scorer-model MODEL]``; GPT-2 large, its
``default_model``, when no MODEL is given).

A sample is the text ``genodiff sample`` wrote (``TextTokenizer.decode_sample``): it ends where
the model put [PAD] (a padded sentence at its first [SEP]: ``TextDataModule.end_samples``), and
the sentences of a wrapped block are separated by the text tokenizer's sentence end,
written `` [SEP] `` (bert and trained tokenizers) or ``<|endoftext|>`` (gpt2). The text is
retokenised by the model's own tokenizer: each sentence is encoded on its own (no special
tokens added), consecutive sentences are joined by the model's EOS token (GPT-2:
``<|endoftext|>``, the document boundary it was trained with), and the model's BOS (its EOS
when it has none; GPT-2's are both ``<|endoftext|>``) leads the sample, once. Every token
after it is scored, the sentence boundaries included: its NLL given all the tokens before it
in the sample, in windows of the model's context (``max_position_embeddings``, GPT-2's
``n_positions`` = 1024) that slide as ``genodiff.generative_perplexity`` slides them (the
stride below the window), so a long sample never restarts without context. The model runs in
float32, the softmax over its whole vocabulary; the core sums each sample's NLL in float64 and
reports Gen PPL = exp(sum NLL / scored tokens).

``transformers`` is imported only when a scorer is built (``pip install 'genodiff-text[hub]'``);
registered in the entry-point group ``genodiff.scorers`` as ``hf`` (``genodiff.scorers``).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import Tensor
from torch.nn import functional as F

from genodiff.errors import InputFileNotFoundError, InputImportError, InputValueError
from genodiff.hub import HubError, snapshot, unreadable_cache_entry
from genodiff.scorers import SampleScorer
from genodiff_text.tokenizers import TOKENIZER_FILES, refuse_empty_vocabulary

# The files of a Hub model the scorer reads: its configs, tokenizer files and safetensors
# weights (a pickled pytorch_model.bin is never fetched: reading it could run code).
MODEL_FILES = (*TOKENIZER_FILES, "*.safetensors")

# What ``decode_sample`` writes between sentences: the EOS token of bert-like (and trained)
# tokenizers, and gpt2's.
SENTENCE_ENDS = ("[SEP]", "<|endoftext|>")
_SENTENCE_END = re.compile("|".join(re.escape(marker) for marker in SENTENCE_ENDS))


class HFCausalLMScorer(SampleScorer):
    """A Hugging Face causal LM (``AutoModelForCausalLM``) and its tokenizer, by Hub id or
    local folder, scoring decoded text samples (see the module doc)."""

    default_model = "gpt2-large"  # the MDLM paper's Gen PPL scorer
    description = (
        "text samples scored by a Hugging Face causal LM, a Hub id or a local folder "
        "(default gpt2-large, the MDLM paper's Gen PPL scorer)"
    )
    domain = "text"
    scores_windows_afresh = False  # its BOS leads only the first window

    def __init__(self, model_name: str, device: torch.device) -> None:
        try:
            import transformers
        except ImportError:
            raise InputImportError(
                "the hf scorer needs transformers: pip install 'genodiff-text[hub]' "
                "(from a checkout: pip install -e 'plugins/genodiff-text[hub]')",
                parameter="scorer",
            ) from None
        folder = Path(model_name).expanduser()
        from_hub = not folder.exists()
        try:
            folder = snapshot(model_name, MODEL_FILES) if from_hub else folder
        except HubError as err:
            raise InputFileNotFoundError(
                f"scorer model {model_name}: no local folder of that name, and as a Hugging "
                f"Face Hub id {err}",
                parameter="scorer_model",
            ) from None
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
            model = transformers.AutoModelForCausalLM.from_pretrained(str(folder))
        except Exception as err:  # not found, offline, not a causal LM, corrupt files
            damage = unreadable_cache_entry(folder) if from_hub else None
            if damage is not None:
                raise InputValueError(
                    f"scorer model {model_name}: {damage}", parameter="scorer_model"
                ) from None
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InputFileNotFoundError(
                f"scorer model {model_name}: cannot load a Hugging Face causal LM and its "
                f"tokenizer from it ({type(err).__name__}: {reason}); give a Hub id (the first "
                "use downloads it) or a local folder holding both",
                parameter="scorer_model",
            ) from None
        refuse_empty_vocabulary(tokenizer, f"scorer model {model_name}", "scorer_model")
        eos_id = tokenizer.eos_token_id
        bos_id = eos_id if tokenizer.bos_token_id is None else tokenizer.bos_token_id
        if eos_id is None:
            raise InputValueError(
                f"scorer model {model_name}: its tokenizer has no EOS token to start a sample "
                "and to mark its sentence boundaries",
                parameter="scorer_model",
            )
        self.hf_tokenizer = tokenizer
        self.hf_model = model.to(device=device, dtype=torch.float32).eval()
        self.bos_id, self.eos_id = int(bos_id), int(eos_id)
        self.pad_id = self.eos_id  # padding is told apart by the windows' lengths
        self.device = device
        self.name = model_name
        self.objective = f"hf:{type(model).__name__}"
        self.scoring = (
            "exact next-token NLL under the Hugging Face causal LM of every token of the "
            "retokenised sample after the model's BOS (prepended once, never predicted); "
            "sentences are joined by the model's EOS, which is scored; windows of the model's "
            "context slide with context"
        )
        self.context = getattr(model.config, "max_position_embeddings", None)

    @property
    def default_max_length(self) -> int:
        if self.context is None:
            raise InputValueError(
                f"scorer model {self.name}: its config gives no context length "
                "(max_position_embeddings); give the window (max_length)",
                parameter="max_length",
            )
        return int(self.context)

    def encode(self, text: str) -> list[int]:
        ids = [self.bos_id]
        for k, sentence in enumerate(_SENTENCE_END.split(text)):
            if k:
                ids.append(self.eos_id)
            # no warning for a sample longer than the model's context: it is windowed
            ids += self.hf_tokenizer.encode(
                sentence.strip(), add_special_tokens=False, verbose=False
            )
        return ids

    def window_nll(
        self, ids: Tensor, lengths: Tensor, continues: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Every window is read as it is (the first one starts with BOS, the others continue
        a sample), so ``continues`` changes nothing: position p predicts token p + 1."""
        positions = torch.arange(ids.shape[1], device=ids.device)[None, :]  # (1, W)
        attention = (positions < lengths[:, None]).long()  # (B, W)
        logits = self.hf_model(input_ids=ids, attention_mask=attention).logits.float()
        ahead = torch.roll(ids, -1, dims=1)  # (B, W): the token after each position
        nll = F.cross_entropy(logits.transpose(1, 2), ahead, reduction="none")  # (B, W)
        targets_at = (positions + 1).expand_as(ids)  # (B, W)
        return nll, targets_at < lengths[:, None], targets_at
