"""Speech for the silero-vad benchmark: sentences spoken by Debian's
espeak-ng (sh scripts/install-deps.sh --bench), resampled to 16 kHz and set
between stretches of silence and noise, so that the voice activity
detector has speech to find and non-speech to reject. Calibration and
evaluation use different sentences, voices and noise. numpy only (.venv).

silero-vad 5 and later take 64 samples of context before each 512-sample
chunk at 16 kHz (its Python wrapper, utils_vad.OnnxWrapper, keeps the last
64 samples of the previous input): run() feeds [1, 576] the same way."""
import os
import shutil
import subprocess
import tempfile
import wave

import numpy as np

RATE, CHUNK, CONTEXT = 16000, 512, 64

TEXTS = {
    "calib": [
        "The quick brown fox jumps over the lazy dog.",
        "Please call Stella and ask her to bring these things with her from the store.",
        "A rainbow is a division of white light into many beautiful colors.",
        "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother.",
        "We also need a small plastic snake and a big toy frog for the kids.",
        "She can scoop these things into three red bags, and we will go meet her Wednesday at the train station.",
    ],
    "eval": [
        "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow.",
        "The north wind and the sun were disputing which was the stronger, when a traveler came along.",
        "Quantization makes a model small and fast, and a careful tool keeps it accurate.",
        "It is a long way to the harbour, but the boats leave every hour until midnight.",
        "Nobody expected the meeting to end so early on a Friday afternoon.",
        "Bring the map, a torch and some water; we start climbing at dawn.",
    ],
}
VOICES = {"calib": [("en-us", 160, 50), ("en", 140, 35), ("en-us+f3", 175, 60)],
          "eval": [("en-gb", 150, 45), ("en-us+m3", 130, 40), ("en+f2", 185, 70)]}


def missing():
    """None, or one line saying what is missing and how to install it"""
    if shutil.which("espeak-ng") is None:
        return ("speech: espeak-ng not found (Debian package espeak-ng; "
                "install it with: sh scripts/install-deps.sh --bench)")
    return None


def _say(text, voice, speed, pitch):
    """espeak-ng's waveform of text, as float32 at RATE"""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", path, text],
                       check=True, capture_output=True)
        with wave.open(path) as w:
            rate, n = w.getframerate(), w.getnframes()
            x = np.frombuffer(w.readframes(n), np.int16).astype(np.float64) / 32768
    # resample in the frequency domain (band-limited: nothing above 8 kHz)
    m = int(round(len(x) * RATE / rate))
    spec = np.fft.rfft(x)[:m // 2 + 1]
    return (np.fft.irfft(spec, m) * m / len(x)).astype(np.float32)


def signal(kind, seconds, seed):
    """about `seconds` of kind's sentences between silence and noise, as
    [chunks, 512] float32; the same arguments give the same samples"""
    r = np.random.default_rng(seed)
    texts, voices = TEXTS[kind], VOICES[kind]
    parts, n, i = [], 0, 0
    while n < seconds * RATE:
        gap = int(r.uniform(0.5, 3.0) * RATE)
        level = r.choice([0.0005, 0.003, 0.02])
        parts.append((r.standard_normal(gap) * level).astype(np.float32))
        voice, speed, pitch = voices[i % len(voices)]
        s = _say(texts[i % len(texts)], voice, speed, pitch)
        s = s * np.float32(r.uniform(0.3, 0.9) / max(np.abs(s).max(), 1e-6))
        s += (r.standard_normal(len(s)) * level * 0.5).astype(np.float32)
        parts.append(s)
        n += gap + len(s)
        i += 1
    x = np.concatenate(parts)
    x = x[:len(x) // CHUNK * CHUNK]
    return x.reshape(-1, CHUNK)


def run(session, chunks):
    """speech probability per chunk with the state and context carried, and
    the feeds given (what a calibration set of this model holds)"""
    state, sr = np.zeros((2, 1, 128), np.float32), np.array(RATE, np.int64)
    ctx = np.zeros((1, CONTEXT), np.float32)
    probs, feeds = [], []
    for c in chunks:
        x = np.concatenate([ctx, c.reshape(1, CHUNK)], axis=1)
        feeds.append({"input": x, "state": state, "sr": sr})
        p, state = session.run(None, feeds[-1])
        ctx = x[:, -CONTEXT:]
        probs.append(p.reshape(-1))
    return np.concatenate(probs), feeds
