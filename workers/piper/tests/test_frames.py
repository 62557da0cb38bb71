"""The frames between the daemon and the Piper worker, each way, against files that the Swift side
checks too (Tests/SpeakdIntegrationTests/PiperFrameTests.swift):

- frames/job.bin is the job frame the daemon writes (PiperRenderer.jobFrame writes exactly these
  bytes); the worker reads it here.
- frames/worker.bin is what the worker writes for a job's audio (its frame_bytes and event_bytes
  write exactly these bytes, checked here); the daemon reads it with WorkerFrame.

The worker module needs only the standard library to be imported: these run with any python3.
"""

import importlib.util
import io
import pathlib
import struct
import unittest

HERE = pathlib.Path(__file__).resolve().parent
FRAMES = HERE / "frames"

_specification = importlib.util.spec_from_file_location(
    "speakd_piper_worker", HERE.parent / "speakd-piper-worker.py")
worker = importlib.util.module_from_spec(_specification)
_specification.loader.exec_module(worker)


def worker_frames():
    """The frames of frames/worker.bin, as the worker writes them."""
    events = (worker.event_bytes(worker.WORD_EVENT, 441, 0, 4)
              + worker.event_bytes(worker.SENTENCE_EVENT, 441, 0)
              + worker.event_bytes(worker.WORD_EVENT, 9_000, 5, 6))
    samples = struct.pack("<5h", 0, 1_000, -1_000, 32_767, -32_768)
    return (worker.frame_bytes(b"E", events) + worker.frame_bytes(b"P", samples)
            + worker.frame_bytes(b"D") + worker.frame_bytes(b"F", "ValueError: no voice".encode()))


class JobFrameTests(unittest.TestCase):
    def test_reads_the_job_frame_the_daemon_writes(self):
        stream = io.BytesIO((FRAMES / "job.bin").read_bytes())
        kind, payload = worker.read_frame(stream.read)
        self.assertTrue(worker.is_job(kind, payload))
        chunking, job = worker.parse_job(payload)
        self.assertEqual(chunking, b"S")
        self.assertEqual(job, {"segments": [
            {"text": "Gate twelve, now boarding.", "position": 0, "lengthScale": 1.25, "volume": 0.5,
             "pauseAfter": 0.6},
            {"text": "Olá, São Paulo", "position": 27, "lengthScale": 1.0, "volume": 1.0, "pauseAfter": 0.0},
        ]})
        self.assertIsNone(worker.read_frame(stream.read), "one frame, then the end of the stream")

    def test_refuses_another_job_version_and_other_frames(self):
        kind, payload = worker.read_frame(io.BytesIO((FRAMES / "job.bin").read_bytes()).read)
        self.assertFalse(worker.is_job(kind, payload[:1] + bytes([worker.JOB_VERSION + 1]) + payload[2:]))
        self.assertFalse(worker.is_job(b"C", b""))

    def test_a_broken_stream_is_an_error_not_a_frame(self):
        whole = (FRAMES / "job.bin").read_bytes()
        with self.assertRaisesRegex(ValueError, "ended inside a frame"):
            worker.read_frame(io.BytesIO(whole[:-3]).read)
        oversized = b"J" + struct.pack("<I", worker.MAX_PAYLOAD + 1)
        with self.assertRaisesRegex(ValueError, "over the limit"):
            worker.read_frame(io.BytesIO(oversized).read)


class WorkerFrameTests(unittest.TestCase):
    def test_writes_the_frames_the_daemon_reads(self):
        self.assertEqual(worker_frames(), (FRAMES / "worker.bin").read_bytes())

    def test_no_pcm_frame_is_over_the_payload_limit(self):
        # A whole render's flush held over 1 MiB of audio on a fast machine; the daemon takes such
        # a frame for a broken peer.
        written = []
        original = worker.write_frame
        worker.write_frame = lambda kind, payload=b"": written.append((kind, payload))
        try:
            pcm = bytes(range(256)) * (3 * worker.MAX_PAYLOAD // 256 + 10)
            worker.write_pcm(pcm)
        finally:
            worker.write_frame = original
        self.assertEqual([kind for kind, _ in written], [b"P"] * 4)
        self.assertTrue(all(len(payload) <= worker.MAX_PAYLOAD for _, payload in written))
        self.assertEqual(b"".join(payload for _, payload in written), pcm)

    def test_reads_back_what_it_writes(self):
        stream = io.BytesIO(worker_frames())
        kinds = []
        while (frame := worker.read_frame(stream.read)) is not None:
            kinds.append(frame[0])
        self.assertEqual(kinds, [b"E", b"P", b"D", b"F"])


if __name__ == "__main__":
    unittest.main()
