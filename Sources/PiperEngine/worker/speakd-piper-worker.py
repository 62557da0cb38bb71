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
# A job's audio starts this long before its first sound: the voice's own silence ahead of it (about
# 23 ms for en_US-joe-medium) would only delay the first audible sample.
LEAD_SECONDS = 0.010
# Freed memory is given back once no job has come for this long, not after every job: a full
# garbage collection takes 15-20 ms with the model loaded, a sixth of a short sentence's render.
IDLE_SECONDS = 0.5
# A sample sounds above this absolute value (about -54 dBFS), as for speakd's trailing-silence trim.
SOUND_THRESHOLD = 64
# The sound of a word after a pause begins where it rises out of at least this much silence, at
# most this far before the phoneme the model aligned the word with (by up to 20 ms for
# en_US-joe-medium): its event is placed there, not at the phoneme.
ONSET_GAP_SECONDS = 0.005
ONSET_SEARCH_SECONDS = 0.040
# No word's event comes sooner than this after a job's first sound: the sink's clock is least sure
# of a stream's first samples, and a first word's event placed at its sound came up to 6 ms before
# it in the recording (wordEventsFollowTheSound), where later words' never did.
FIRST_WORD_SECONDS = 0.010
# A streamed job's first sound waits for the encoder and this many latent frames of the decoder
# (a frame is the voice's hop, 256 samples: 32 frames are 0.37 s at 22,050 Hz), not for its first
# sentence's whole decoder; the rest of that sentence is decoded while those frames play.
FIRST_FRAMES = 32
# The decoder is given this many latent frames beyond a part on each side, so that a part's samples
# are those of the whole sentence's decode to the bit (samplesArePiperTTSOwn checks it): with 32,
# up to 9 samples of a sentence came out one step apart; with 48, none did, in four sentences.
CONTEXT_FRAMES = 48
WORD = re.compile(r"[\w][\w'’.-]*\w|\w", re.UNICODE)
PUNCTUATION = set(",.;:!?…—–-\"'()¡¿«»")
BRACKETS = str.maketrans("[]", "()")
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def write_frame(kind, payload=b""):
    out = sys.stdout.buffer
    out.write(kind + struct.pack("<I", len(payload)) + payload)
    out.flush()


def read_exactly(count):
    data = b""
    while len(data) < count:
        piece = os.read(0, count - len(data))
        if not piece:
            return None
        data += piece
    return data


def read_frame():
    header = read_exactly(5)
    if header is None:
        return None
    kind, length = header[:1], struct.unpack("<I", header[1:])[0]
    if length > MAX_PAYLOAD:
        raise ValueError(f"a frame of {length} bytes is over the limit")
    payload = read_exactly(length) if length else b""
    if payload is None:
        raise ValueError("the stream ended inside a frame")
    return kind, payload


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
            cut = max(sentence.rfind(mark, 0, limit) for mark in ",;:")
            if cut <= 0:
                cut = sentence.rfind(" ", 0, limit)
            if cut <= 0:
                cut = limit
            pieces.append((offset, sentence[: cut + 1]))
            offset += cut + 1
            sentence = sentence[cut + 1 :]
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

    def render_piece(self, text, length_scale, first_frames=0):
        """The piece's audio (float, the voice's rate) in parts, each with the samples (from the
        piece's start) where the phoneme words it brings start. With `first_frames`, the first
        part is that many frames of its first sentence, made without waiting for the rest of it."""
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
            for start, end in ([(0, cut), (cut, frames)] if cut else [(0, frames)]):
                yield self.model.decode(start, end), word_starts if start == 0 else []
            first_frames = 0
            base += frames * self.model.hop

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
        """Renders the job, frame by frame (streamed) or in one events frame and one PCM frame
        (whole); each word's event goes with the PCM frame its first sample is in."""
        import numpy as np

        whole = chunking == b"W"
        # PCM parts not yet sent (whole); events not yet sent: (sample, kind, position, length,
        # whether the word comes after a pause)
        pending, events = [], []
        produced = 0
        first_word = 0  # the earliest sample a word's event may have (set at the job's first sound)
        scale = self.rate / self.voice_rate

        def send(samples):
            """Sends the samples that follow `produced`, with the events that fall in them (every
            event falls in its piece's audio, so none is left at the end)."""
            nonlocal events
            end = produced + len(samples)
            due = []
            for sample, kind, position, length, paused in events:
                if sample >= end:
                    continue
                if paused and sample >= produced:
                    # A word after a pause starts with its sound, which may come a little before
                    # the phoneme the model aligned it with (never before this frame's start).
                    sample = produced + sound_onset(samples, sample - produced, self.rate)
                if kind == WORD_EVENT:
                    sample = max(sample, first_word)
                due.append(event_bytes(kind, sample, position, length))
            events = [event for event in events if event[0] >= end]
            if whole:
                pending.append((due, samples))
                return
            if due:
                write_frame(b"E", b"".join(due))
            if len(samples):
                write_frame(b"P", samples.tobytes())

        try:
            for index, segment in enumerate(job["segments"]):
                text, base_position = segment["text"], segment["position"]
                # Streamed, the first sound waits for the first piece only: keep it short.
                for offset, piece in split_sentences(text, first=index == 0 and not whole):
                    if jobs.is_cancelled():
                        write_frame(b"D")
                        return
                    piece_start, lead = produced, 0
                    events.append((produced, SENTENCE_EVENT, base_position + offset, 0, False))
                    # Text words are matched to the phoneme words the model spoke, in order; a
                    # text word spoken as several (a number) starts at the first of them.
                    words, word_starts, spoken_index = self.words_of(piece), [], 0
                    streamed_start = not whole and produced == 0
                    parts = self.render_piece(
                        piece, segment["lengthScale"], FIRST_FRAMES if streamed_start else 0)
                    for audio, starts in parts:
                        audio = self.to_output_rate(audio) * segment["volume"]
                        samples = np.clip(audio * 32767.0, -32767, 32767).astype("<i2")
                        # The job's first sound comes LEAD_SECONDS after its start, and no word's
                        # event sooner than FIRST_WORD_SECONDS after it (`send` sees to that).
                        if produced == 0 and piece_start == 0:
                            keep = int(round(LEAD_SECONDS * self.rate))
                            lead = leading_silence(samples, keep)
                            samples = samples[lead:]
                            first_word = (keep if lead else 0) + int(round(FIRST_WORD_SECONDS * self.rate))
                        word_starts += starts
                        while words and spoken_index < len(word_starts):
                            start, length, spoken = words.pop(0)
                            word_start, paused = word_starts[spoken_index]
                            sample = piece_start + max(0, int(word_start * scale) - lead)
                            events.append((sample, WORD_EVENT, base_position + offset + start, length, paused))
                            spoken_index += spoken
                        send(samples)
                        produced += len(samples)
                pause = int(round(float(segment.get("pauseAfter") or 0) * self.rate))
                if pause > 0:
                    send(np.zeros(pause, dtype="<i2"))
                    produced += pause
        except Exception:
            if not jobs.is_cancelled():
                raise
            # A model run was terminated by the cancel: the job ends here.
            write_frame(b"D")
            return
        if whole and pending:
            write_frame(b"E", b"".join(event for due, _ in pending for event in due))
            write_frame(b"P", np.concatenate([samples for _, samples in pending]).tobytes())
        write_frame(b"D")


def leading_silence(samples, keep):
    """How many samples at the start to leave out: all before the first sounding one but `keep`."""
    import numpy as np

    sounding = np.flatnonzero(np.abs(samples.astype(np.int32)) > SOUND_THRESHOLD)
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
        if kind != b"J" or len(payload) < 2 or payload[1] != JOB_VERSION:
            print(f"speakd-piper-worker: unexpected frame {kind!r}", file=sys.stderr, flush=True)
            sys.exit(2)
        jobs.begin()
        try:
            job = json.loads(payload[2:].decode("utf-8"))
            renderer.run(job, payload[:1], jobs)
        except Exception as error:  # one job's failure, reported; the worker stays
            write_frame(b"F", f"{type(error).__name__}: {error}".encode())
        finally:
            jobs.end()


if __name__ == "__main__":
    main()
