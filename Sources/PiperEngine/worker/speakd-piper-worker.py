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

    def __init__(self, voice):
        import onnxruntime

        self.onnxruntime = onnxruntime
        self.frames = queue.Queue()
        self.lock = threading.Lock()
        self.received = 0  # jobs read from the daemon
        self.running = None  # the job number being rendered
        self.cancelled = 0  # the last job a cancel arrived for
        self.options = onnxruntime.RunOptions()
        session = voice.session
        jobs = self

        class AbortableSession:
            """The voice's session, run with the current job's options."""

            def run(self, output_names, input_feed, run_options=None):
                with jobs.lock:
                    options = jobs.options
                return session.run(output_names, input_feed, options)

            def __getattr__(self, name):
                return getattr(session, name)

        voice.session = AbortableSession()

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


def word_events(events):
    payload = b""
    for sample, position, length in events:
        payload += struct.pack("<BIIIH", 1, sample, position, length, 0)
    return payload


def sentence_event(sample, position):
    return struct.pack("<BIIIH", 2, sample, position, 0, 0)


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


class Renderer:
    def __init__(self, model, config, rate, deterministic=False, threads=0):
        import onnxruntime
        from piper import PiperVoice

        # PiperVoice.load makes its session with onnxruntime.SessionOptions() and takes no options
        # of its own, so the thread count is set on the options it makes, during the load only.
        make_options = onnxruntime.SessionOptions

        def options():
            made = make_options()
            if threads > 0:
                made.intra_op_num_threads = threads
            return made

        onnxruntime.SessionOptions = options
        try:
            self.voice = PiperVoice.load(model, config_path=config, include_alignments=True)
        finally:
            onnxruntime.SessionOptions = make_options
        self.threads = self.voice.session.get_session_options().intra_op_num_threads
        self.voice_rate = self.voice.config.sample_rate
        self.rate = rate or self.voice_rate
        self.hop = self.voice.config.hop_length
        self.noise = 0.0 if deterministic else None

    def to_output_rate(self, audio):
        import numpy as np

        if self.rate == self.voice_rate or len(audio) == 0:
            return audio
        count = int(round(len(audio) * self.rate / self.voice_rate))
        return np.interp(
            np.arange(count) * (self.voice_rate / self.rate), np.arange(len(audio)), audio
        ).astype(np.float32)

    def render_piece(self, text, length_scale):
        """Audio (float, the voice's rate) and the sample where each of its phoneme words starts."""
        import numpy as np
        from piper import SynthesisConfig

        config = SynthesisConfig(
            length_scale=length_scale, noise_scale=self.noise, noise_w_scale=self.noise, normalize_audio=False)
        # Piper reads "[[ … ]]" as raw phonemes: a request's text never is (IPA is refused by
        # name), so brackets become parentheses, which keeps every character's position.
        text = text.translate(BRACKETS)
        audio_parts, word_starts, base = [], [], 0
        for chunk in self.voice.synthesize(text, config, include_alignments=True):
            position, boundary = base, True
            for alignment in chunk.phoneme_alignments or []:
                if alignment.phoneme in (" ", "^", "$"):
                    boundary = True
                elif alignment.phoneme not in PUNCTUATION and boundary:
                    word_starts.append(position)
                    boundary = False
                position += int(alignment.num_samples)
            audio_parts.append(chunk.audio_float_array)
            base += len(chunk.audio_float_array)
        audio = np.concatenate(audio_parts) if audio_parts else np.zeros(0, dtype=np.float32)
        return audio, word_starts

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
        import numpy as np

        pending, pending_events = [], []
        produced = 0
        for index, segment in enumerate(job["segments"]):
            text, base_position = segment["text"], segment["position"]
            # Streamed, the first sound waits for the first piece only: keep it short.
            for offset, piece in split_sentences(text, first=index == 0 and chunking != b"W"):
                if jobs.is_cancelled():
                    write_frame(b"D")
                    return
                try:
                    audio, word_starts = self.render_piece(piece, segment["lengthScale"])
                except Exception:
                    if not jobs.is_cancelled():
                        raise
                    # The run was terminated by the cancel: the job ends here.
                    write_frame(b"D")
                    return
                audio = self.to_output_rate(audio) * segment["volume"]
                samples = np.clip(audio * 32767.0, -32767, 32767).astype("<i2")
                # The job's first sound comes LEAD_SECONDS after its start, and no word of it before.
                lead = floor = 0
                if produced == 0:
                    keep = int(round(LEAD_SECONDS * self.rate))
                    lead = leading_silence(samples, keep)
                    samples = samples[lead:]
                    floor = keep if lead else 0
                scale = self.rate / self.voice_rate
                events = [sentence_event(produced, base_position + offset)]
                # Text words are matched to the phoneme words the model spoke, in order; a text
                # word spoken as several (a number) starts at the first of them.
                index = 0
                for start, length, spoken in self.words_of(piece):
                    if index < len(word_starts):
                        sample = produced + max(floor, int(word_starts[index] * scale) - lead)
                        events.append(word_events([(sample, base_position + offset + start, length)]))
                    index += spoken
                produced += len(samples)
                if chunking == b"W":
                    pending.append(samples)
                    pending_events += events
                else:
                    write_frame(b"E", b"".join(events))
                    write_frame(b"P", samples.tobytes())
            pause = int(round(float(segment.get("pauseAfter") or 0) * self.rate))
            if pause > 0:
                silence = np.zeros(pause, dtype="<i2")
                produced += pause
                if chunking == b"W":
                    pending.append(silence)
                else:
                    write_frame(b"P", silence.tobytes())
        if pending:
            write_frame(b"E", b"".join(pending_events))
            write_frame(b"P", np.concatenate(pending).tobytes())
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


def main():
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
    arguments = parser.parse_args()

    renderer = Renderer(arguments.model, arguments.config, arguments.rate, arguments.deterministic, arguments.threads)
    # Warm the model and the phonemiser before confinement: both load lazily on first use.
    renderer.render_piece("Ready.", 1.0)
    release_memory()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import piper_sandbox  # beside this file

    jobs = Jobs(renderer.voice)
    sandbox = piper_sandbox.confine(memory_limit_mib=arguments.memory_limit_mib, user=arguments.user)
    # Started once confined: Landlock and seccomp hold for the threads a confined thread starts.
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
