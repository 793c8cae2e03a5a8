"""
A stand-in for a vLLM server (`trl vllm-serve` or `vllm serve`), so that `GRPOTrainer(use_vllm=True,
vllm_mode="server")` runs on CPU with TRL's real `VLLMClient`: every request the client makes (`/health`, `/v1/models`,
`/server_info`, `/get_world_size`, `/v1/completions`, `/reset_prefix_cache`) is answered over HTTP by a server in a
thread of the test process, which samples from its own copy of the tiny model.

Three things cannot run here and are replaced (`install`):

- **vLLM itself** is not installed: `is_vllm_available()` answers `True` to the two TRL modules that ask;
- **the NCCL weight transfer** (`VLLMClient.init_communicator`, `update_named_params`), which needs CUDA and vLLM's
  communicator: each weight sync is posted to the server as one safetensors payload instead, with the same names,
  dtypes and shapes TRL announces;
- **vLLM's sampler**: the server samples with the tiny model's own forward pass at the requested temperature, seeded by
  the weights it holds and the prompt, so that the same weights and prompt give the same completions (a resumed run
  generates what an uninterrupted one did). Log-probabilities are those of the sampled tokens after temperature
  (vLLM's `processed_logprobs`).
"""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors


WEIGHTS_PATH = "/stand_in/load_weights"  # where the stand-in weight transfer posts a sync


class StandInServer:
    """
    The server: `url` to pass as `vllm_server_base_url`; `requests`, the prompt token ids of every `/v1/completions`
    request in order; `syncs`, a float64 copy of every weight sync received, by name.
    """

    def __init__(self, model, eos_token_id: int):
        self.model = model.eval()
        self.eos_token_id = eos_token_id
        self.requests: list[list[list[int]]] = []
        self.syncs: list[dict[str, torch.Tensor]] = []
        self._digest = _digest(model.state_dict())
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> "StandInServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def load_weights(self, payload: bytes) -> None:
        tensors = load_safetensors(payload)
        with self._lock:
            missing = set(tensors) - set(dict(self.model.named_parameters()))
            if missing:
                raise KeyError(f"weights for parameters the model lacks: {sorted(missing)}")
            self.model.load_state_dict(tensors, strict=False)
            self._digest = _digest(self.model.state_dict())
            self.syncs.append({name: t.double() for name, t in tensors.items()})

    def complete(self, request: dict) -> dict:
        """`/v1/completions` for token-id prompts: `n` completions of each, prompt-major, vLLM's response shape."""
        prompts, n = request["prompt"], request.get("n", 1)
        temperature, max_tokens = request.get("temperature", 1.0), request.get("max_tokens", 16)
        choices = []
        with self._lock:
            self.requests.append([list(p) for p in prompts])
            for prompt in prompts:
                seed = int.from_bytes(hashlib.blake2b(f"{self._digest}{prompt}".encode(), digest_size=8).digest())
                for tokens, logprobs in self._sample(prompt, n, temperature, max_tokens, seed):
                    choices.append(
                        {
                            "prompt_token_ids": list(prompt),
                            "token_ids": tokens,
                            "logprobs": {
                                "tokens": [f"token_id:{t}" for t in tokens],
                                "token_logprobs": logprobs,
                                "top_logprobs": [None] * len(tokens),
                            },
                        }
                    )
        return {"choices": choices}

    @torch.no_grad()
    def _sample(self, prompt: list[int], n: int, temperature: float, max_tokens: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        for _ in range(n):
            ids, tokens, logprobs = list(prompt), [], []
            while len(tokens) < max_tokens:
                logits = self.model(torch.tensor([ids])).logits[0, -1].double() / temperature
                log_probs = torch.log_softmax(logits, dim=-1)
                token = int(torch.multinomial(log_probs.exp(), 1, generator=generator))
                tokens.append(token)
                logprobs.append(float(log_probs[token]))
                ids.append(token)
                if token == self.eos_token_id:
                    break
            yield tokens, logprobs


def install(monkeypatch) -> None:
    """TRL's vLLM path taken without vLLM, and its NCCL weight transfer replaced by a post to the stand-in."""
    import trl.generation.vllm_client as vllm_client
    import trl.generation.vllm_generation as vllm_generation

    for module in (vllm_client, vllm_generation):
        monkeypatch.setattr(module, "is_vllm_available", lambda *args, **kwargs: True)

    def init_communicator(self, device=0):
        self.communicator = "stand-in"

    def update_named_params(self, metadata, named_params):
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in named_params}
        announced = [(name, dtype, shape) for name, dtype, shape in metadata]
        sent = [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in tensors.items()]
        assert sent == announced, "the weights streamed are not those announced"
        self._post(f"{self.base_url}{WEIGHTS_PATH}", data=save_safetensors(tensors))

    monkeypatch.setattr(vllm_client.VLLMClient, "init_communicator", init_communicator)
    monkeypatch.setattr(vllm_client.VLLMClient, "update_named_params", update_named_params)


def received_norms(server: StandInServer) -> list[float]:
    """`||w_t - w_{t-1}||_2` between consecutive weight syncs the server received, over every parameter."""
    norms = []
    for before, after in zip(server.syncs, server.syncs[1:]):
        squares = sum(float(((after[name] - before[name]) ** 2).sum()) for name in after)
        norms.append(squares**0.5)
    return norms


def _digest(state: dict[str, torch.Tensor]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(state):
        h.update(name.encode())
        h.update(np.ascontiguousarray(state[name].detach().float().numpy()).tobytes())
    return h.hexdigest()


def _handler(server: StandInServer):
    info = {
        "vllm_config": {
            "model_config": {"logprobs_mode": "processed_logprobs"},
            "weight_transfer_config": {"backend": "nccl"},
        }
    }
    get = {
        "/health": {},
        "/v1/models": {"data": [{"id": "stand-in"}]},
        "/server_info": info,
        "/get_world_size": {"world_size": 1},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            path = self.path.split("?")[0].rstrip("/")
            self._reply(200, get[path]) if path in get else self._reply(404, {"error": path})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = self.path.rstrip("/")
            try:
                if path == "/v1/completions":
                    self._reply(200, server.complete(json.loads(body)))
                elif path == WEIGHTS_PATH:
                    server.load_weights(body)
                    self._reply(200, {})
                elif path == "/reset_prefix_cache":
                    self._reply(200, {"success": True})
                else:
                    self._reply(404, {"error": path})
            except Exception as error:  # the client raises with this text
                self._reply(400, {"error": f"{type(error).__name__}: {error}"})

        def _reply(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler
