"""speakd's Piper engine worker: renders jobs with one Piper voice, loaded once.

It speaks the frame layout of speakd's engine workers (WorkerFrame) on standard input and output:
a frame is a one-byte kind, a four-byte little-endian payload length and the payload.

  worker -> daemon  R  u32 sample rate, then a UTF-8 description of the sandbox and the
                       onnxruntime threads                                  (once, at start)
                    E  events of the PCM frame that follows (kind u8, sample u32, position u32,
                       length u32, name length u16 + name), as WorkerFrame encodes them
                    P  s16le mono samples
                    D  the job ended (rendered, or aborted by a cancel)
                    F  the job failed (UTF-8 message)
  daemon -> worker  J  mode byte (S or W), version byte (1), then UTF-8 JSON:
                       {"segments": [{"text", "position", "lengthScale", "volume", "pauseAfter"}]}
                       where position is the 1-based scalar offset of the segment's text in the
                       daemon's engine input
                    C  abort the job being rendered (ignored when idle): the model run in
                       flight is terminated (onnxruntime's RunOptions.terminate), not finished

Usage: speakd-piper-worker.py --model VOICE.onnx [--config VOICE.onnx.json] [--rate HZ]
       [--memory-limit-mib MIB] [--user NAME] [--threads N] [--deterministic]
"""

import argparse
import json
import os
import re
import queue
import struct
import sys
import threading
import time
import unicodedata

# Python's -I ignores PYTHONDONTWRITEBYTECODE: the worker writes no __pycache__ beside itself
# (an installed /usr/share/speakd/piper stays as the package left it).
sys.dont_write_bytecode = True

JOB_VERSION = 1
MAX_PAYLOAD = 1 << 20
# A sentence is cut at a clause (",;:") and, failing that, at a space once it is this many
# characters long, so that one model run stays short (memory grows with the sentence).
MAX_SENTENCE_CHARACTERS = 220
# The first piece of a job whose first sentence is over that is cut at this many: its first sound
# then waits for about one short sentence's render, not a 220-character one's.
FIRST_PIECE_CHARACTERS = 60
# A piece that the phonemiser makes more phonemes of than this (divided by the length scale when
# that is over 1: a slower rate makes more frames of each phoneme) is cut again, at a clause, else a
# space, else anywhere: characters alone do not bound a model run, since a character of another
# script, a symbol or a long number is read as several words ("Chinese letter ..."), and the
# model's memory grows with the frames of one run (the encoder's alignment with frames x phonemes).
# It is also under the phonemiser's own bound on one word (espeak-ng keeps about 200 phonemes of a
# word and drops the rest): a run of digits or letters without a space is cut until all of it is
# spoken. 200 phonemes are about 1,000 frames (12 s) at most (a spelt word, 6 frames a phoneme).
MAX_PHONEMES = 200
# The decoder makes at most this many latent frames (5.9 s at 22,050 Hz) in one run; a longer
# sentence is decoded in parts (CONTEXT_FRAMES keeps them the whole decode's samples). It bounds
# the decoder's memory, which grows with the frames of one run, and the time between two frames
# sent to the daemon. A whole render decodes a sentence of at most this many frames in one run, and
# a longer one in these parts too.
DECODE_FRAMES = 512
# Rendered whole, a job's audio is still sent at least this often (in one frame per interval, not
# one per part): the daemon kills a worker that sends nothing for its stall limit (10 s).
WHOLE_FLUSH_SECONDS = 2.0
# A job's audio starts this long before its first sound: the voice's own silence ahead of it (about
# 23 ms for en_US-joe-medium) would only delay the first audible sample.
LEAD_SECONDS = 0.002
# Freed memory is given back once no job has come for this long, not after every job: a full
# garbage collection takes 15-20 ms with the model loaded, a sixth of a short sentence's render.
IDLE_SECONDS = 0.5
# A sample sounds above this absolute value (about -54 dBFS), as for speakd's trailing-silence trim.
SOUND_THRESHOLD = 64
# A job's first sound starts at the first sample above this (about -66 dBFS): the daemon raises
# Piper's speech by about 10 dB to the loudness target, so a sample of 16 here plays at about 64
# (-54 dBFS), where the sink's first audible sample is. Found at 64, the first sound (and so its
# first word's event) was placed 2-18 ms after the sink heard it.
FIRST_SOUND_THRESHOLD = 16
# A job ends at its last sample above this (about -50 dBFS, -40 dBFS once raised to the loudness
# target): the voice's decay below it (13-25 ms for joe-medium) is not sent, as speakd leaves out
# espeak-ng's trailing silence. It made `finished` come 18-32 ms after the last sample the sink
# played above -44 dBFS.
TAIL_THRESHOLD = 104
# The sound of a word after a pause begins where it rises out of at least this much silence, at
# most this far before the phoneme the model aligned the word with (by up to 20 ms for
# en_US-joe-medium): its event is placed there, not at the phoneme.
ONSET_GAP_SECONDS = 0.005
ONSET_SEARCH_SECONDS = 0.040
# A job's first sound waits for the encoder and this many latent frames of the decoder (a frame is
# the voice's hop, 256 samples: 32 frames are 0.37 s at 22,050 Hz), not for its first sentence's
# whole decoder; the rest of that sentence is decoded while those frames play. A whole render sends
# them at once too (a Wyoming peer's first audio chunk): with the whole sentence decoded first, the
# first chunk of en_US-joe-medium came about twice as late.
FIRST_FRAMES = 32
# The decoder is given this many latent frames beyond a part on each side, so that a part's samples
# are those of the whole sentence's decode to the bit (samplesArePiperTTSOwn checks it): with 32,
# up to 9 samples of a sentence came out one step apart; with 48, none did, in four sentences.
CONTEXT_FRAMES = 48
# Each sentence is brought to this loudness (LUFS, ITU-R BS.1770) before it is sent: a Piper
# voice's sentences differ by up to 5 LU at the same settings (joe-medium: -22.5 to -27.7 LUFS over
# twelve announcements, espeak-ng's -19.8 to -21.0), and the daemon's loudness stage applies one
# gain per voice. -25 leaves the voice's peaks (up to 25 dB over its loudness) under full scale.
SENTENCE_LOUDNESS = -25.0
# A levelled sentence's peaks are held to this many dB over SENTENCE_LOUDNESS, by a limiter that
# looks PEAK_WINDOW_SECONDS ahead and back (a Piper voice's peaks stand up to 25 dB over its
# loudness). At an output target of -18 LUFS, 16 dB puts them under the daemon's limiter ceiling
# (-1 dBFS), which otherwise took back 0.1-0.4 LU more from some announcements than from the
# calibration's reference, so they played up to 0.55 LU under the target. What the daemon's limiter
# still does (a louder target, a volume over 1) is measured by its calibration as before.
PEAK_OVER_LOUDNESS = 16.0
PEAK_WINDOW_SECONDS = 0.005
# A sentence decoded in parts is levelled part by part, each at the gain all of it so far needs;
# a change of gain is spread over this long.
LEVEL_RAMP_SECONDS = 0.05
# The loudness of a sentence is measured this many 400 ms blocks at a time (bounded memory).
LOUDNESS_BLOCKS = 32
WORD = re.compile(r"[\w][\w'’.-]*\w|\w", re.UNICODE)
PUNCTUATION = set(",.;:!?…—–-\"'()¡¿«»")
BRACKETS = str.maketrans("[]", "()")
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
# A run of text without a space this long may be one the phonemiser drops the end of (MAX_PHONEMES).
LONG_RUN = re.compile(r"\S{33,}")
# Control characters (NUL made the phonemiser raise ValueError) and lone surrogates become spaces,
# which keeps every other character's position.
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def frame_bytes(kind, payload=b""):
    """One frame as the daemon reads it (WorkerFrame): a kind byte, the payload's length (32 bits,
    little-endian), the payload."""
    return kind + struct.pack("<I", len(payload)) + payload


def write_frame(kind, payload=b""):
    out = sys.stdout.buffer
    out.write(frame_bytes(kind, payload))
    out.flush()


def write_pcm(pcm):
    """s16le samples as `P` frames of at most MAX_PAYLOAD bytes each: the daemon takes a larger
    frame for a broken peer (a whole render's flush on a fast machine held 24 s of audio, over
    1 MiB, and the job failed as if the worker had died)."""
    for start in range(0, len(pcm), MAX_PAYLOAD):
        write_frame(b"P", pcm[start : start + MAX_PAYLOAD])


def read_exactly(count, read=lambda size: os.read(0, size)):
    data = b""
    while len(data) < count:
        piece = read(count - len(data))
        if not piece:
            return None
        data += piece
    return data


def read_frame(read=lambda size: os.read(0, size)):
    """The next frame from the daemon (standard input, or `read`): (kind, payload), or None at
    the end of the stream."""
    header = read_exactly(5, read)
    if header is None:
        return None
    kind, length = header[:1], struct.unpack("<I", header[1:])[0]
    if length > MAX_PAYLOAD:
        raise ValueError(f"a frame of {length} bytes is over the limit")
    payload = read_exactly(length, read) if length else b""
    if payload is None:
        raise ValueError("the stream ended inside a frame")
    return kind, payload


def is_job(kind, payload):
    """Whether a frame is a job this worker reads: `J`, of JOB_VERSION."""
    return kind == b"J" and len(payload) >= 2 and payload[1] == JOB_VERSION


def parse_job(payload):
    """A job frame's chunking (b"W" whole, b"S" streamed) and its input (voice segments)."""
    return payload[:1], json.loads(payload[2:].decode("utf-8"))


class Jobs:
    """Frames from the daemon, read on a thread of their own so that a cancel reaches a job while
    its model run is in flight: the run is terminated through the RunOptions it was given.

    A cancel belongs to the last job received before it (the daemon sends one job at a time and
    never cancels a job after reading its end), so a late cancel never aborts the next job.
    """

    def __init__(self, model):
        import onnxruntime

        self.onnxruntime = onnxruntime
        self.frames = queue.Queue()
        self.lock = threading.Lock()
        self.received = 0  # jobs read from the daemon
        self.running = None  # the job number being rendered
        self.cancelled = 0  # the last job a cancel arrived for
        self.options = onnxruntime.RunOptions()
        model.run_options = self.run_options

    def run_options(self):
        """The options the current job's model runs are made with (a cancel terminates them)."""
        with self.lock:
            return self.options

    def start_reading(self):
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while True:
            try:
                frame = read_frame()
            except ValueError as error:
                self.frames.put(error)
                return
            if frame is not None and frame[0] == b"C":
                with self.lock:
                    self.cancelled = self.received
                    if self.running == self.received:
                        self.options.terminate = True
                continue
            if frame is not None and frame[0] == b"J":
                with self.lock:
                    self.received += 1
            self.frames.put(frame)
            if frame is None:
                return

    def next_frame(self, idle=None):
        """The next frame from the daemon; `idle` is called first when none comes within
        IDLE_SECONDS (a worker kept busy never pays for it)."""
        try:
            frame = self.frames.get(timeout=IDLE_SECONDS if idle else None)
        except queue.Empty:
            idle()
            frame = self.frames.get()
        if isinstance(frame, Exception):
            raise frame
        return frame

    def begin(self):
        """Marks the next job received as the one rendering, with fresh run options."""
        with self.lock:
            self.running = self.received
            self.options = self.onnxruntime.RunOptions()
            if self.cancelled == self.running:
                self.options.terminate = True

    def end(self):
        with self.lock:
            self.running = None

    def is_cancelled(self):
        with self.lock:
            return self.running is not None and self.cancelled == self.running


WORD_EVENT, SENTENCE_EVENT = 1, 2


def event_bytes(kind, sample, position, length=0):
    """One event as WorkerFrame encodes it (no name)."""
    return struct.pack("<BIIIH", kind, sample, position, length, 0)


def sound_onset(samples, index, rate):
    """Where the sound that runs into samples[index] starts: after the last stretch of at least
    ONSET_GAP_SECONDS without a sounding sample, at most ONSET_SEARCH_SECONDS back; `index` when
    the sound runs on further back than that, or when samples[index] is not in a sound."""
    import numpy as np

    gap, search = int(ONSET_GAP_SECONDS * rate), int(ONSET_SEARCH_SECONDS * rate)
    low = max(0, index - search)
    sounding = np.flatnonzero(np.abs(samples[low : index + 1].astype(np.int32)) > SOUND_THRESHOLD) + low
    if len(sounding) == 0 or sounding[-1] < index - gap:
        return index
    gaps = np.flatnonzero(np.diff(sounding) > gap)
    if len(gaps):
        return int(sounding[gaps[-1] + 1])
    return int(sounding[0]) if sounding[0] - low > gap or low == 0 else index


def k_weighting(rate, size):
    """The power response of BS.1770's K-weighting filter (its two biquads, as libebur128 makes
    them for `rate`) at the bins of a real FFT of `size` samples."""
    import numpy as np

    k = np.tan(np.pi * 1681.974450955533 / rate)
    vh, q = 10 ** (3.999843853973347 / 20), 0.7071752369554196
    vb, a0 = vh**0.4996667741545416, 1 + k / q + k * k
    shelf = ([(vh + vb * k / q + k * k) / a0, 2 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0],
             [1, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0])
    k, q = np.tan(np.pi * 38.13547087602444 / rate), 0.5003270373238773
    d = 1 + k / q + k * k
    high_pass = ([1.0, -2.0, 1.0], [1, 2 * (k * k - 1) / d, (1 - k / q + k * k) / d])
    z = np.exp(-2j * np.pi * np.arange(size // 2 + 1) / size)  # z^-1 at each bin
    response = 1
    for b, a in (shelf, high_pass):
        response = response * (b[0] + b[1] * z + b[2] * z * z) / (a[0] + a[1] * z + a[2] * z * z)
    return np.abs(response) ** 2


def sliding_minimum(values, width):
    """The minimum of `values` over each window of `width` (odd) centred on each index, the
    values past either end counting as +inf; in linear time (van Herk, Gil and Werman)."""
    import numpy as np

    half = width // 2
    count = len(values)
    padded = np.full(count + 2 * half + (-(count + 2 * half)) % width, np.inf, dtype=np.float64)
    padded[half : half + count] = values
    blocks = padded.reshape(-1, width)
    prefix = np.minimum.accumulate(blocks, axis=1).ravel()
    suffix = np.minimum.accumulate(blocks[:, ::-1], axis=1)[:, ::-1].ravel()
    # The window starting at i covers suffix[i] (to its block's end) and prefix[i + width - 1].
    return np.minimum(suffix[:count], prefix[width - 1 : width - 1 + count])


def peak_limited(audio, ceiling, width):
    """`audio` (float) with every sample's magnitude at most `ceiling`: the gain each sample
    needs, held over `width` samples (odd) each way and averaged over as many, so it falls
    before a peak and recovers after it in straight lines, never above what any sample in reach
    needs. Untouched where no sample passes the ceiling."""
    import numpy as np

    magnitude = np.abs(audio)
    if len(audio) == 0 or magnitude.max() <= ceiling:
        return audio
    needed = np.minimum(1.0, ceiling / np.maximum(magnitude, 1e-12))
    # Every window holds its own sample, so no +inf reaches the average.
    held = sliding_minimum(needed, width)
    # The moving average over `width`, from a running sum (linear time, whatever the width).
    half = width // 2
    sums = np.concatenate(([0.0], np.cumsum(np.pad(held, half, mode="edge"))))
    smoothed = (sums[width:] - sums[:-width]) / width
    return (audio * np.minimum(smoothed, needed)).astype(audio.dtype)


def loudness(audio, rate):
    """The integrated loudness of `audio` (float, full scale 1) in LUFS, as BS.1770 gates it over
    400 ms blocks (one block when shorter), from their K-weighted spectra; None when silent. It
    reads what libebur128 reads to 0.01 LU on Piper's sentences."""
    import numpy as np

    size = int(0.4 * rate)
    if len(audio) < size:
        size = len(audio) - len(audio) % 2
        blocks = audio[None, :size]
    else:
        blocks = np.lib.stride_tricks.sliding_window_view(audio, size)[:: size // 4]
    if size < 2:
        return None
    weights = k_weighting(rate, size)
    # The blocks' spectra a few at a time: all at once, they took 1.2 MiB a second of audio.
    power = np.concatenate([
        (np.abs(np.fft.rfft(blocks[first : first + LOUDNESS_BLOCKS], axis=1)) ** 2 * weights).sum(axis=1)
        for first in range(0, len(blocks), LOUDNESS_BLOCKS)
    ]) * 2 / size / size
    power = power[power > 10 ** ((-70 + 0.691) / 10)]
    if not len(power):
        return None
    power = power[power > power.mean() / 10]
    return -0.691 + 10 * np.log10(power.mean())


def cut_before(text, limit):
    """How many characters of `text` (at most `limit` + 1, at least 1) its first piece takes: up
    to the last clause mark before `limit`, else the last space, else `limit` (a hard cut)."""
    cut = max(text.rfind(mark, 0, limit) for mark in ",;:")
    if cut <= 0:
        cut = text.rfind(" ", 0, limit)
    if cut <= 0:
        cut = limit
    return max(1, cut + 1)


def phoneme_bound(length_scale):
    """The most phonemes of one model run at this length scale (MAX_PHONEMES, fewer when slower)."""
    return max(1, int(MAX_PHONEMES / max(1.0, float(length_scale))))


def cut_near_middle(text):
    """Where to cut `text` (1 to len - 1) in two: after the clause mark (",;:") nearest its middle
    in its middle half, else after the space nearest its middle, else at the character boundary
    nearest its middle that does not split a character from the marks that go with it."""
    middle, quarter = len(text) // 2, max(1, len(text) // 4)
    clauses = [index + 1 for index, character in enumerate(text[:-1]) if character in ",;:"]
    spaces = [index + 1 for index, character in enumerate(text[:-1]) if character.isspace()]
    for cuts in ([cut for cut in clauses if abs(cut - middle) <= quarter], spaces):
        if cuts:
            return min(cuts, key=lambda cut: (abs(cut - middle), cut))

    def joins(cut):  # text[cut] belongs to the character before it
        return unicodedata.category(text[cut])[0] == "M" or text[cut - 1] == "\u200d" or text[cut] == "\u200d"

    for distance in range(len(text)):
        for cut in (middle - distance, middle + distance):
            if 0 < cut < len(text) and not joins(cut):
                return cut
    return max(1, middle)


def phonemes_dropped(run, count):
    """Whether the phonemiser drops the end of `run` (text without a space): espeak-ng keeps about
    200 phonemes of one word (a run of digits was said to about its 45th). Its two halves then make
    clearly more phonemes together than all of it."""
    cut = cut_near_middle(run)
    return count(run[:cut]) + count(run[cut:]) > 1.1 * count(run) + 2


def cut_by_phonemes(offset, piece, count, limit):
    """(start, piece) pairs, in order and together all of `piece` (which starts at `offset`): the
    piece, cut again (near its middle: at a clause, else a space, else anywhere) until each makes
    at most `limit` phonemes by `count` and none has a word the phonemiser drops the end of. A
    single character is never cut."""
    if len(piece) < 2:
        return [(offset, piece)]
    cut = None
    if count(piece) > limit:
        cut = cut_near_middle(piece)
    else:
        for run in LONG_RUN.finditer(piece):
            if phonemes_dropped(run.group(), count):
                cut = run.start() + cut_near_middle(run.group())
                break
    if cut is None:
        return [(offset, piece)]
    return cut_by_phonemes(offset, piece[:cut], count, limit) + cut_by_phonemes(
        offset + cut, piece[cut:], count, limit)


def split_sentences(text, first=False):
    """(start, piece) pairs: sentences of text, long ones cut at clauses or spaces; with `first`,
    the text starts the job, and an over-long first sentence's first piece is a short one."""
    pieces = []
    start = 0
    for match in list(SENTENCE_END.finditer(text)) + [None]:
        end = match.start() if match else len(text)
        sentence = text[start:end]
        offset = start
        while len(sentence) > MAX_SENTENCE_CHARACTERS:
            limit = FIRST_PIECE_CHARACTERS if first and not pieces else MAX_SENTENCE_CHARACTERS
            cut = cut_before(sentence, limit)
            pieces.append((offset, sentence[:cut]))
            offset += cut
            sentence = sentence[cut:]
        pieces.append((offset, sentence))
        if match:
            start = match.end()
    return [(offset, piece) for offset, piece in pieces if WORD.search(piece)]


class Model:
    """The voice's model, in the place of the onnxruntime session piper-tts runs it with, split
    in two at the decoder's first layer: the encoder (phoneme ids to latent frames, with each
    phoneme's duration) and the decoder (latent frames to audio, `hop` samples a frame).

    piper-tts runs the whole model in one call per sentence, so a sentence's first sample waits
    for its last. Here piper-tts's call runs the encoder only: piper-tts still phonemises and maps
    the durations to phonemes, and the worker then decodes the frames in as many parts as it
    likes. The decoder sees CONTEXT_FRAMES beyond each part, so the parts' samples are the ones
    the whole decoder gives, to the bit. A model without that layer (not exported by Piper's
    training code) runs whole, and its sentences are not decoded in parts.
    """

    DECODER_FIRST_LAYER = "/dec/conv_pre/Conv"

    def __init__(self, path, hop, threads):
        import onnxruntime

        def session(serialized, encoder=False):
            options = onnxruntime.SessionOptions()
            if threads > 0:
                options.intra_op_num_threads = threads
            if encoder:
                # The decoder runs right after the encoder, on threads of its own: the encoder's
                # threads must not spin waiting for work meanwhile (that made a sentence 35% slower),
                # and its small tensors need no arena of its own (one kept 55 MiB more).
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                options.enable_cpu_mem_arena = False
            return onnxruntime.InferenceSession(serialized, sess_options=options, providers=["CPUExecutionProvider"])

        self.latent_name, encoder, decoder = self.split(path)
        self.encoder = session(encoder, encoder=decoder is not None)
        self.decoder = session(decoder) if decoder else None
        self.threads = self.encoder.get_session_options().intra_op_num_threads
        self.hop = hop
        self.latent = None
        self.run_options = None  # a function giving the current job's RunOptions (set by Jobs)

    @classmethod
    def split(cls, path):
        """The model's latent tensor, and the encoder's and decoder's graphs, serialized; without
        the decoder's first layer, None, the whole model and None. (The graphs themselves are
        gone when this returns, before any session is made.)"""
        import onnx
        from onnx.utils import Extractor
        from piper.patch_voice_with_alignment import add_alignment_output

        graph = onnx.load(path)
        try:
            add_alignment_output(graph)  # the phonemes' durations, as piper-tts's own load does
        except ValueError:
            pass  # already an output of this model
        outputs = [output.name for output in graph.graph.output]
        latent = next((node.input[0] for node in graph.graph.node if node.name == cls.DECODER_FIRST_LAYER), None)
        if not latent:
            return None, graph.SerializeToString(), None
        extractor = Extractor(graph)
        inputs = [tensor.name for tensor in graph.graph.input]
        encoder = extractor.extract_model(inputs, [latent] + outputs[1:]).SerializeToString()
        decoder = extractor.extract_model([latent], outputs[:1]).SerializeToString()
        return latent, encoder, decoder

    def options(self):
        return self.run_options() if self.run_options else None

    def run(self, output_names, input_feed, run_options=None):
        """piper-tts's call, once a sentence: the encoder's outputs, with a silent placeholder of
        the sentence's length for the audio; `decode` makes the audio."""
        import numpy as np

        outputs = self.encoder.run(None, input_feed, self.options())
        if self.decoder is None:
            self.latent = None
            return outputs
        self.latent = outputs[0]
        return [np.zeros(self.frames() * self.hop, dtype=np.float32)] + outputs[1:]

    def frames(self):
        return self.latent.shape[2] if self.latent is not None else 0

    def decode(self, start, end):
        """The audio (float, in [-1, 1]) of the last sentence's latent frames start..<end."""
        import numpy as np

        low, high = max(0, start - CONTEXT_FRAMES), min(self.frames(), end + CONTEXT_FRAMES)
        audio = self.decoder.run(None, {self.latent_name: self.latent[:, :, low:high]}, self.options())[0]
        audio = audio.reshape(-1)[(start - low) * self.hop : (end - low) * self.hop]
        return np.clip(audio, -1.0, 1.0)


class Renderer:
    def __init__(self, model, config, rate, deterministic=False, threads=0):
        # Deterministic renders are piper-tts's own samples, not levelled (for the tests that
        # compare the two).
        self.level = not deterministic
        from piper import PiperVoice
        from piper.config import PiperConfig

        with open(config or f"{model}.json", encoding="utf-8") as file:
            piper_config = PiperConfig.from_dict(json.load(file))
        self.model = Model(model, piper_config.hop_length, threads)
        self.voice = PiperVoice(session=self.model, config=piper_config)
        self.threads = self.model.threads
        self.voice_rate = piper_config.sample_rate
        self.rate = rate or self.voice_rate
        self.noise = 0.0 if deterministic else None

    def to_output_rate(self, audio):
        import numpy as np

        if self.rate == self.voice_rate or len(audio) == 0:
            return audio
        count = int(round(len(audio) * self.rate / self.voice_rate))
        return np.interp(
            np.arange(count) * (self.voice_rate / self.rate), np.arange(len(audio)), audio
        ).astype(np.float32)

    def render_piece(self, text, length_scale, first_frames=0, whole=False):
        """The piece's audio (float, the voice's rate) in parts, each with the samples (from the
        piece's start) where the phoneme words it brings start. With `first_frames`, the first
        part is that many frames of its first sentence, made without waiting for the rest of it.
        `whole` (nobody listens to the parts as they come, only to the job's first sound) decodes
        each sentence of up to DECODE_FRAMES once and cuts the same parts from it: the same
        samples (a part decoded with CONTEXT_FRAMES around it is the whole decode's), without
        decoding the context twice. The first part of `first_frames` is still decoded alone, so
        that the job's first sound waits for it only (a Wyoming peer's first audio chunk)."""
        from piper import SynthesisConfig

        config = SynthesisConfig(
            length_scale=length_scale, noise_scale=self.noise, noise_w_scale=self.noise, normalize_audio=False)
        # Piper reads "[[ … ]]" as raw phonemes: a request's text never is (IPA is refused by
        # name), so brackets become parentheses, which keeps every character's position.
        text = text.translate(BRACKETS)
        base = 0
        for chunk in self.voice.synthesize(text, config, include_alignments=True):
            # A word's start, and whether a pause comes before it (the sentence's start or a
            # punctuation mark): its sound can start a few frames before the phoneme it is
            # aligned with, and is looked for when its samples are made.
            word_starts, position, boundary, paused = [], base, True, True
            for alignment in chunk.phoneme_alignments or []:
                if alignment.phoneme in (" ", "^", "$"):
                    boundary = True
                elif alignment.phoneme in PUNCTUATION:
                    paused = True
                elif boundary:
                    word_starts.append((position, paused))
                    boundary = paused = False
                position += int(alignment.num_samples)
            frames = self.model.frames()
            if not frames:  # the model ran whole
                yield chunk.audio_float_array, word_starts
                base += len(chunk.audio_float_array)
                continue
            # The rate is converted part by part, so parts are made only where it needs none.
            cut = first_frames if 0 < first_frames < frames and self.rate == self.voice_rate else 0
            bounds = [0] + ([cut] if cut else [])
            if self.rate == self.voice_rate:
                bounds += list(range(bounds[-1] + DECODE_FRAMES, frames, DECODE_FRAMES))
            bounds.append(frames)
            # Whole, a sentence of up to DECODE_FRAMES is decoded in one run and its parts cut
            # from it (but the job's first part, decoded alone and sent first); a longer one is
            # decoded part by part as when streamed (the same samples): one run of all its frames
            # took up to 250 MiB more.
            decoded = None
            hop = self.model.hop
            for start, end in zip(bounds, bounds[1:]):
                if whole and decoded is None and frames <= DECODE_FRAMES and not (start == 0 and cut):
                    decoded = self.model.decode(0, frames)
                audio = decoded[start * hop : end * hop] if decoded is not None else self.model.decode(start, end)
                yield audio, word_starts if start == 0 else []
            first_frames = 0
            base += frames * self.model.hop

    def levelled(self, made, audio, gain):
        """`audio`, the next part of a sentence whose parts so far, levelled, `made` holds, at the
        gain that brings the whole so far to SENTENCE_LOUDNESS (the parts before keep theirs),
        reached from `gain` (the last part's) over LEVEL_RAMP_SECONDS, its peaks held to
        PEAK_OVER_LOUDNESS over it; and that gain."""
        import numpy as np

        target = gain or 1.0
        ramp = np.ones(len(audio), dtype=np.float32)
        length = min(len(audio), int(LEVEL_RAMP_SECONDS * self.rate)) if gain is not None else 0
        ceiling = 10 ** ((SENTENCE_LOUDNESS + PEAK_OVER_LOUDNESS) / 20)
        width = 2 * int(PEAK_WINDOW_SECONDS * self.rate) + 1

        def at(target):
            ramp[:length] = np.linspace(gain or target, target, length, endpoint=False)
            ramp[length:] = target
            return peak_limited(audio * ramp, ceiling, width)

        # Two measurements: the gain that brings the part to SENTENCE_LOUDNESS, then once more
        # through the limiter at that gain, which takes back nearly the same fraction at a gain
        # a little higher; so the second correction is made without measuring again.
        levelled = at(target)
        for _ in range(2):
            measured = loudness(np.concatenate(made + [levelled]), self.rate)
            if measured is None or abs(measured - SENTENCE_LOUDNESS) < 0.05:
                break
            target = min(max(target * 10 ** ((SENTENCE_LOUDNESS - measured) / 20), 0.125), 8.0)
            levelled = at(target)
        made.append(levelled)
        return levelled, target

    def phoneme_count(self, text):
        """How many phonemes the voice's phonemiser makes of `text` (as a model run is given it)."""
        return sum(len(sentence) for sentence in self.voice.phonemize(text.translate(BRACKETS)))

    def bounded(self, offset, piece, length_scale=1.0):
        """(start, piece) pairs: the piece, cut again until each makes at most the phoneme bound
        at this length scale (`cut_by_phonemes`)."""
        return cut_by_phonemes(offset, piece, self.phoneme_count, phoneme_bound(length_scale))

    def words_of(self, text):
        """Text words with how many phoneme words each one is spoken as (a number is several)."""
        words = []
        for match in WORD.finditer(text):
            spoken = sum(
                1
                for sentence in self.voice.phonemize(match.group())
                for word in "".join(sentence).split(" ")
                if any(phoneme not in PUNCTUATION for phoneme in word)
            )
            words.append((match.start(), len(match.group()), max(1, spoken)))
        return words

    def run(self, job, chunking, jobs):
        """Renders the job, frame by frame (streamed) or in as few events and PCM frames as its
        stall limit allows (whole); each word's event goes with the PCM frame its first sample is
        in. The quiet end of what is made so far is held back until more sound follows, and
        dropped at the job's end."""
        import numpy as np

        whole = chunking == b"W"
        # PCM parts not yet sent (whole); events not yet sent: (sample, kind, position, length,
        # whether the word comes after a pause)
        pending, events = [], []
        produced = 0  # samples made, held back ones included
        sent = 0  # samples sent (or pending, whole)
        held = np.zeros(0, dtype="<i2")  # made, not sent: the quiet end of what was made
        held_events = []  # (sample, bytes) of events in or after the held samples
        flushed = time.monotonic()
        sounded = False  # whether any sample above TAIL_THRESHOLD was made
        first_word = 0  # the earliest sample a word's event may have: the job's first sound
        scale = self.rate / self.voice_rate

        def emit(due, samples):
            nonlocal sent, flushed
            sent += len(samples)
            if whole:
                pending.append((due, samples))
                # The job's first sound goes at once (a Wyoming peer waits for it); the rest in as
                # few frames as the stall limit allows.
                if time.monotonic() - flushed > WHOLE_FLUSH_SECONDS or sent == len(samples) > 0:
                    flush_pending()
                return
            if due:
                write_frame(b"E", b"".join(due))
            if len(samples):
                write_pcm(samples.tobytes())

        def flush_pending():
            nonlocal pending, flushed
            flushed = time.monotonic()
            if pending:
                write_frame(b"E", b"".join(event for due, _ in pending for event in due))
                write_pcm(np.concatenate([samples for _, samples in pending]).tobytes())
            pending = []

        def send(samples, final=False):
            """Takes the samples that follow `produced`, with the events that fall in them (every
            event falls in its piece's audio, so none is left at the end); sends what is not the
            quiet end of all made so far (`final`: all but that end, which is dropped)."""
            nonlocal events, held, held_events, sounded
            end = produced + len(samples)
            for sample, kind, position, length, paused in events:
                if sample >= end:
                    continue
                if paused and sample >= produced:
                    # A word after a pause starts with its sound, which may come a little before
                    # the phoneme the model aligned it with (never before this frame's start).
                    sample = produced + sound_onset(samples, sample - produced, self.rate)
                if kind == WORD_EVENT:
                    sample = max(sample, first_word)
                held_events.append((sample, kind, position, length))
            events = [event for event in events if event[0] >= end]
            if len(held):
                samples = np.concatenate([held, samples])
            sounding = np.flatnonzero(np.abs(samples.astype(np.int32)) > TAIL_THRESHOLD)
            keep = int(sounding[-1]) + 1 if len(sounding) else 0
            sounded = sounded or keep > 0
            held = samples[keep:]
            samples = samples[:keep]
            if final:
                held = np.zeros(0, dtype="<i2")
            # Events of dropped samples (a word of no sound) come with the last sample sent.
            limit = sent + len(samples) if not final else None
            due = [event for event in held_events if limit is None or event[0] < limit]
            held_events = [event for event in held_events if limit is not None and event[0] >= limit]
            last = max(sent + len(samples) - 1, 0)
            emit([event_bytes(kind, min(sample, last), position, length) for sample, kind, position, length in due], samples)

        try:
            segments = job["segments"]
            for index, segment in enumerate(segments):
                text, base_position = CONTROLS.sub(" ", segment["text"]), segment["position"]
                # Streamed, the first sound waits for the first piece only: keep it short. A whole
                # render's first piece is made the same way, cut and levelled alike, so the
                # chunking changes how the audio is sent and never its samples: levelled part by
                # part, a streamed sentence's peaks differ from one levelled at once, and the
                # daemon's loudness calibration (one gain per voice, through the peak limiter)
                # holds for both only if they are the same.
                pieces = [
                    bounded
                    for offset, piece in split_sentences(text, first=index == 0)
                    for bounded in self.bounded(offset, piece, segment["lengthScale"])
                ]
                for offset, piece in pieces:
                    if jobs.is_cancelled():
                        write_frame(b"D")
                        return
                    piece_start, lead = produced, 0
                    events.append((produced, SENTENCE_EVENT, base_position + offset, 0, False))
                    # Text words are matched to the phoneme words the model spoke, in order; a
                    # text word spoken as several (a number) starts at the first of them.
                    words, word_starts, spoken_index = self.words_of(piece), [], 0
                    parts = self.render_piece(
                        piece, segment["lengthScale"], FIRST_FRAMES if produced == 0 else 0, whole)
                    made, gain = [], None
                    for audio, starts in parts:
                        audio = self.to_output_rate(audio)
                        if self.level:
                            audio, gain = self.levelled(made, audio, gain)
                        audio = audio * segment["volume"]
                        samples = np.clip(audio * 32767.0, -32767, 32767).astype("<i2")
                        # The job's first sound comes LEAD_SECONDS after its start, and no word's
                        # event before it (`send` sees to that).
                        if produced == 0 and piece_start == 0:
                            keep = int(round(LEAD_SECONDS * self.rate))
                            lead = leading_silence(samples, keep)
                            samples = samples[lead:]
                            first_word = keep if lead else 0
                        word_starts += starts
                        while words and spoken_index < len(word_starts):
                            start, length, spoken = words.pop(0)
                            word_start, paused = word_starts[spoken_index]
                            sample = piece_start + max(0, int(word_start * scale) - lead)
                            events.append((sample, WORD_EVENT, base_position + offset + start, length, paused))
                            spoken_index += spoken
                        send(samples)
                        produced += len(samples)
                last = index == len(segments) - 1
                if last:
                    send(np.zeros(0, dtype="<i2"), final=True)
                    produced = sent
                pause = int(round(float(segment.get("pauseAfter") or 0) * self.rate))
                if pause > 0:
                    silence = np.zeros(pause, dtype="<i2")
                    if last:
                        emit([], silence)  # asked for: sent as it is
                    else:
                        send(silence)
                    produced += pause
        except Exception:
            if not jobs.is_cancelled():
                raise
            # A model run was terminated by the cancel: the job ends here.
            write_frame(b"D")
            return
        if whole:
            flush_pending()
        if not sounded:
            # Nothing the voice could say (a text of emoji or of a script its phonemiser has no
            # rules for): a failure, never a silent job reported as spoken.
            raise ValueError("the voice spoke nothing of this text")
        write_frame(b"D")

def leading_silence(samples, keep):
    """How many samples at the start to leave out: all before the first sounding one but `keep`."""
    import numpy as np

    sounding = np.flatnonzero(np.abs(samples.astype(np.int32)) > FIRST_SOUND_THRESHOLD)
    return max(0, int(sounding[0]) - keep) if len(sounding) else 0


def release_memory():
    """Gives freed memory back (the in-memory patched model copy at start, a long job's buffers)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def start(argv=None):
    """Loads the voice and confines the worker, as it runs before its first job (the sandbox
    probe, Tests/SandboxProbe/piper-sandbox-probe.py, calls it too): the renderer, the jobs (not
    yet reading) and what the sandbox enforces."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--config")
    parser.add_argument("--rate", type=int, default=0)
    parser.add_argument("--memory-limit-mib", type=int, default=0)
    parser.add_argument("--user", help="the user to become when started as root (default: nobody)")
    parser.add_argument(
        "--threads", type=int, default=0, help="onnxruntime intra-op threads (default 0: one per core)")
    parser.add_argument(
        "--deterministic", action="store_true", help="noise scales 0: the same text always gives the same samples")
    arguments = parser.parse_args(argv)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import piper_sandbox  # beside this file

    # onnxruntime looks for GPUs in /sys/bus/pci when it is imported, and starts no thread.
    import onnxruntime  # noqa: F401

    # Reads confined before onnxruntime starts its threads (Landlock holds only for threads
    # started after it), the rest once the voice is loaded.
    voice_files = [arguments.model, arguments.config or f"{arguments.model}.json"]
    sandbox = piper_sandbox.Sandbox(piper_sandbox.worker_paths(voice_files), user=arguments.user)
    renderer = Renderer(arguments.model, arguments.config, arguments.rate, arguments.deterministic, arguments.threads)
    # Warm the model and the phonemiser before the rest of the confinement: both load lazily on
    # first use.
    for _ in renderer.render_piece("Ready.", 1.0, FIRST_FRAMES):
        pass
    release_memory()
    jobs = Jobs(renderer.model)
    return renderer, jobs, sandbox.confine(memory_limit_mib=arguments.memory_limit_mib)


def main():
    renderer, jobs, sandbox = start()
    # Started once confined (seccomp holds for every thread, Landlock for those started after it).
    jobs.start_reading()
    threads = f"onnxruntime threads {renderer.threads}" if renderer.threads else "onnxruntime threads: one per core"
    write_frame(b"R", struct.pack("<I", renderer.rate) + f"{sandbox}; {threads}".encode())

    while True:
        frame = jobs.next_frame(idle=release_memory)
        if frame is None:
            return
        kind, payload = frame
        if not is_job(kind, payload):
            print(f"speakd-piper-worker: unexpected frame {kind!r}", file=sys.stderr, flush=True)
            sys.exit(2)
        jobs.begin()
        try:
            chunking, job = parse_job(payload)
            renderer.run(job, chunking, jobs)
        except Exception as error:  # one job's failure, reported; the worker stays
            write_frame(b"F", f"{type(error).__name__}: {error}".encode())
        finally:
            jobs.end()


if __name__ == "__main__":
    main()
