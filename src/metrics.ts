/**
 * The service's Prometheus metrics (prom-client), served at `GET /metrics`. One registry per app,
 * so several apps in one process (the tests) never mix their figures. Values the service already
 * keeps (live sessions, dropped frames, jobs by status) are read at scrape time; events are
 * counted where they happen, through the small observer interfaces the domain code declares
 * (`PipelineObserver` in the pipeline), so the domain never imports prom-client.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { WorkerObserver } from "./dubbing/jobs/worker.js";
import type { HostStatus } from "./core/contracts.js";
import type { PipelineObserver, PipelineStage } from "./pipeline/translation-pipeline.js";

/**
 * Client close codes counted as themselves: normal, going away, none given, and the connection
 * dropped without a close frame. Any other (a client may choose any of about 2,000) is "other".
 */
const CLIENT_CLOSE_CODES = new Set([1000, 1001, 1005, 1006]);

/** Latencies from 10 ms to about 40 s. */
const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 40];
/** Dubbing stages last from a fraction of a second to many minutes. */
const STAGE_BUCKETS = [0.1, 0.5, 1, 5, 15, 60, 180, 600, 1800];

export interface MetricSources {
  readonly sessions: {
    readonly liveCount: number;
    readonly capacity: number;
    readonly droppedAudioFrames: number;
  };
  readonly rooms: { readonly count: number };
  /** Remote engines' circuit breakers. */
  readonly circuits: () => readonly { kind: string; id: string; circuit: "closed" | "open" | "half-open" }[];
  /** The engines' model host processes. */
  readonly hosts: () => readonly HostStatus[];
  /** Dubbing jobs per status (read at scrape time; a failed read leaves the gauge unset). */
  readonly jobsByStatus: () => Promise<Readonly<Record<string, number>>>;
}

export class Metrics {
  readonly registry = new Registry();

  readonly sessionsClosed = new Counter({
    name: "relay_sessions_closed_total",
    help:
      "Real-time sessions closed, by the side that closed and its close code: the server's exactly (1000, 1001, 1008, " +
      "1009, 4401 revoked, 4408 idle, 4409 max length, 4429 account bound, 4500, 4503), the client's as 1000, 1001, " +
      "1005, 1006 or other.",
    labelNames: ["by", "code"] as const,
    registers: [this.registry],
  });

  /** A session socket closed: the server's codes are its own few; a client's are collapsed (it may send any). */
  sessionClosed(code: number, by: "server" | "client"): void {
    const label = by === "server" || CLIENT_CLOSE_CODES.has(code) ? String(code) : "other";
    this.sessionsClosed.inc({ by, code: label });
  }

  readonly pipelineLatency = new Histogram({
    name: "relay_pipeline_latency_seconds",
    help: "Live pipeline latencies: speech onset to first interim, end of speech to final transcript, final transcript to its translation, translation to its first audio frame.",
    labelNames: ["stage"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly engineCalls = new Histogram({
    name: "relay_engine_call_seconds",
    help: "Engine calls made by live pipelines: recognition of an utterance's final, a translation, synthesis up to its first audio.",
    labelNames: ["kind", "engine", "outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly inputDropped = new Counter({
    name: "relay_input_audio_dropped_seconds_total",
    help: "Session input audio dropped because recognition fell more than 30 s behind.",
    registers: [this.registry],
  });

  readonly speech = new Counter({
    name: "relay_speech_seconds_total",
    help: "Translated speech sent by live pipelines, by its speed against the voice's natural rate (1: natural; faster while a listener is behind).",
    labelNames: ["speed"] as const,
    registers: [this.registry],
  });

  readonly httpRequests = new Counter({
    name: "relay_http_requests_total",
    help: "HTTP requests by route and status (429: rate limited, 503: at capacity, 401/402/403: refused).",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
  });

  readonly dubbingStages = new Histogram({
    name: "relay_dubbing_stage_seconds",
    help: "Time dubbing jobs spent in each stage.",
    labelNames: ["stage"] as const,
    buckets: STAGE_BUCKETS,
    registers: [this.registry],
  });

  readonly dubbingFinished = new Counter({
    name: "relay_dubbing_jobs_finished_total",
    help: "Dubbing job runs finished by this process: completed, failed, released (handed back on shutdown), abandoned (left to its lease).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  constructor(sources: MetricSources) {
    collectDefaultMetrics({ register: this.registry, prefix: "relay_" });
    new Gauge({
      name: "relay_sessions_live",
      help: "Open real-time sessions and room translators of this process.",
      registers: [this.registry],
      collect() {
        this.set(sources.sessions.liveCount);
      },
    });
    new Gauge({
      name: "relay_sessions_capacity",
      help: "Sessions this process accepts (MAX_SESSIONS).",
      registers: [this.registry],
      collect() {
        this.set(sources.sessions.capacity);
      },
    });
    new Gauge({
      name: "relay_rooms_open",
      help: "Open translation rooms of this process.",
      registers: [this.registry],
      collect() {
        this.set(sources.rooms.count);
      },
    });
    new Counter({
      name: "relay_output_audio_frames_dropped_total",
      help: "Translated-speech frames skipped for clients that read too slowly.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(sources.sessions.droppedAudioFrames);
      },
    });
    new Gauge({
      name: "relay_engine_circuit",
      help: "Remote engines' circuit breakers: 1 for the state each is in (open: its calls fail at once).",
      labelNames: ["kind", "engine", "state"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { kind, id, circuit } of sources.circuits())
          for (const state of ["closed", "open", "half-open"])
            this.set({ kind, engine: id, state }, state === circuit ? 1 : 0);
      },
    });
    new Gauge({
      name: "relay_model_host_resident_bytes",
      help: "Resident memory of each model host process at its last reply (0: none running).",
      labelNames: ["host"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { host, rssBytes } of sources.hosts()) this.set({ host }, rssBytes);
      },
    });
    new Gauge({
      name: "relay_model_host_failing",
      help: "1 while a model host's last process failed (restarts backing off; its work goes to the next engine).",
      labelNames: ["host"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { host, state } of sources.hosts()) this.set({ host }, state === "failing" ? 1 : 0);
      },
    });
    new Counter({
      name: "relay_model_host_restarts_total",
      help: "Model host processes replaced, by why: crash, timeout (stopped answering), memory (past its ceiling).",
      labelNames: ["host", "reason"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { host, restarts } of sources.hosts())
          for (const [reason, count] of Object.entries(restarts)) this.inc({ host, reason }, count);
      },
    });
    new Gauge({
      name: "relay_dubbing_jobs",
      help: "Dubbing jobs in the database by status (pending is the queue depth).",
      labelNames: ["status"] as const,
      registers: [this.registry],
      async collect() {
        const counts = await sources.jobsByStatus().catch(() => undefined);
        if (!counts) return;
        this.reset();
        for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
      },
    });
  }

  /** What the dubbing workers report to (see `WorkerObserver`). */
  readonly dubbing: WorkerObserver = {
    stage: (stage, seconds) => this.dubbingStages.observe({ stage }, seconds),
    finished: (outcome) => this.dubbingFinished.inc({ outcome }),
  };

  /** What a live pipeline reports to (see `PipelineObserver`). */
  readonly pipeline: PipelineObserver = {
    latency: (stage: PipelineStage, seconds: number) => this.pipelineLatency.observe({ stage }, seconds),
    engineCall: (kind, engine, seconds, ok) =>
      this.engineCalls.observe({ kind, engine, outcome: ok ? "ok" : "error" }, seconds),
    inputDropped: (seconds) => this.inputDropped.inc(seconds),
    speech: (speed, seconds) => this.speech.inc({ speed: speed.toFixed(2) }, seconds),
  };
}
