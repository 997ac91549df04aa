/**
 * Rooms in several languages (docs/rooms.md) on the embedded room server, the service as `npm start`
 * runs it (PocketSphinx, Apertium, eSpeak NG): a room of 4 participants in 2 languages (en, es:
 * 2 English speakers, 2 Spanish listeners) and in 3 (en, es, fr: 2 English speakers, a Spanish and
 * a French listener), the two speakers speaking at once, each their own real recording streamed in
 * 20 ms frames at real-time pace and followed by 1.5 s of silence so that the VAD ends the utterance.
 *
 *   1. per listener, end of speech (the client sent the speaker's last loud 20 ms frame) → the
 *      utterance's closing final translation, and → the first translated audio frame after it;
 *   2. CPU per speaking participant: the service's process tree (its Apertium and eSpeak NG
 *      children too) per second of speech per speaker, so the cost of a lane shows;
 *   3. how many such rooms one process holds at once in real time.
 *
 * Only English is spoken (the only offline recognizer here): Spanish and French are the rooms'
 * listen-only languages. The engines are pinned (ENGINES_FILE) so that models pulled later do not
 * change what is measured.
 *
 * With `--livekit` the rooms live on a real LiveKit server (the pinned build, started here on
 * loopback: scripts/local-servers.ts) and the participants join with @livekit/rtc-node, each
 * subscribed to its language's track only: the same measures with WebRTC (Opus) both ways, and
 * the participants' own rtc-node work counted as "this script".
 *
 *   npm run bench:rooms [-- --livekit]
 */
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import type { RealtimeSocket } from "../src/cli/recording-socket.js";
import { LiveKitParticipant } from "../test/support/livekit-participant.js";
import { joinRoom } from "../test/support/room-client.js";
import { startLiveKit } from "./local-servers.js";
import { startServiceProcess } from "../test/support/service-process.js";
import { SHARED, percentile, sleep, speechSpan } from "./realtime-load.js";

const API_KEY = "bench-key";
/** Real time holds while end of speech → first translated audio stays at p90 ≤ this (and nothing is dropped). */
const BOUND_MS = 3000;
const SILENCE_AFTER_S = 1.5;
const LATENCY_ROUNDS = 5;
const CAPACITY_ROUNDS = 2;
const MAX_ROOMS = 16;
/** Offset between the rooms' starts in the capacity runs, as real rooms do not start in step. */
const ROOM_OFFSET_MS = 250;
/** The capacity runs stop climbing past this much run time (the whole bench should stay under ~15 min). */
const CAPACITY_BUDGET_MS = 6 * 60_000;
/** Other work on the machine (cores) above which a failed capacity step is run again. */
const BUSY_CORES = 0.5;

/** Speaker A's and speaker B's recordings, one pair a round; within a pair the lengths differ. */
const PAIRS: readonly (readonly [string, string])[] = [
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0870.wav", "ljspeech/wavs/LJ001-0004.wav"],
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0920.wav", "ljspeech/wavs/LJ001-0013.wav"],
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0890.wav", "ljspeech/wavs/LJ001-0017.wav"],
  ["librivox-pocketsphinx/goforward.wav", "ljspeech/wavs/LJ001-0006.wav"],
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0880.wav", "ljspeech/wavs/LJ001-0019.wav"],
  ["librivox-pocketsphinx/sense_and_sensibility_01_austen_64kb-0930.wav", "ljspeech/wavs/LJ001-0020.wav"],
];
const WARM_UP: readonly [string, string] = ["ljspeech/wavs/LJ001-0002.wav", "ljspeech/wavs/LJ001-0008.wav"];

interface RoomConfig {
  readonly label: string;
  readonly languages: readonly string[];
  /** The two listeners' languages (the two speakers speak English). */
  readonly listeners: readonly [string, string];
}
const CONFIGS: readonly RoomConfig[] = [
  { label: "2 languages (en, es)", languages: ["en", "es"], listeners: ["es", "es"] },
  { label: "3 languages (en, es, fr)", languages: ["en", "es", "fr"], listeners: ["es", "fr"] },
];

const LIVEKIT = process.argv.includes("--livekit");
const started = performance.now();
console.log(
  `Machine: ${cpus()[0]?.model ?? "unknown CPU"} × ${cpus().length}, Node.js ${process.version}, ` +
    `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, load average ${loadavg()[0]!.toFixed(1)}, ` +
    `rooms on ${LIVEKIT ? "a LiveKit server (rtc-node participants)" : "the embedded room server"}\n`,
);

// ---------------------------------------------------------------- clips
interface Speech {
  readonly name: string;
  /** The recording (trailing silence trimmed) and then SILENCE_AFTER_S of silence. */
  readonly pcm: Int16Array;
  /** Sample index just past the last 20 ms frame louder than 10 % of the loudest. */
  readonly speechEnd: number;
}

async function loadSpeech(name: string): Promise<Speech> {
  const pcm = await readWavAsPcm16(path.join(SHARED, "data/speech", name));
  const speechEnd = speechSpan(pcm).end;
  const padded = new Int16Array(speechEnd + SILENCE_AFTER_S * 16_000);
  padded.set(pcm.subarray(0, speechEnd));
  return { name, pcm: padded, speechEnd };
}

const speeches = new Map<string, Speech>();
for (const name of [...PAIRS.flat(), ...WARM_UP]) speeches.set(name, await loadSpeech(name));
const speech = (name: string) => speeches.get(name)!;

// ---------------------------------------------------------------- the service
const dataDir = mkdtempSync(path.join(tmpdir(), "relay-bench-rooms-"));
const enginesFile = path.join(dataDir, "engines.json");
writeFileSync(
  enginesFile,
  JSON.stringify({
    asr: [{ engine: "pocketsphinx" }],
    mt: [{ engine: "apertium" }],
    tts: [{ engine: "espeak-ng" }],
  }),
);
const livekit = LIVEKIT ? await startLiveKit() : undefined;
const service = await startServiceProcess("bench-rooms", {
  ...(livekit
    ? { LIVEKIT_URL: livekit.url, LIVEKIT_API_KEY: livekit.apiKey, LIVEKIT_API_SECRET: livekit.apiSecret }
    : {}),
  API_KEYS: API_KEY,
  DATA_DIR: dataDir,
  ENGINES_FILE: enginesFile,
  RATE_LIMIT_PER_MINUTE: "10000",
  MAX_SESSIONS: "1000",
  LIVE_SESSIONS_PER_ACCOUNT: "1000",
  ROOMS_EMPTY_PER_ACCOUNT: "1000",
  ROOM_MAX_PARTICIPANTS: "8",
  // One decoder per utterance being recognized: enough for 2 speakers in each of MAX_ROOMS rooms.
  POCKETSPHINX_MAX_DECODERS: String(2 * MAX_ROOMS),
});
const servicePid = service.child.pid!;

/** CPU seconds used so far by the process tree of `root` (exited children included once reaped). */
function treeCpuSeconds(root: number): number {
  const stats = new Map<number, { parent: number; seconds: number }>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/u.test(name)) continue;
    try {
      const fields = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]!.split(" ");
      // utime, stime, and cutime, cstime: children that have exited and were waited for.
      const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
      stats.set(Number(name), { parent: Number(fields[1]), seconds: ticks / 100 });
    } catch {
      // ended meanwhile
    }
  }
  let total = 0;
  const pending = [root];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    total += stats.get(pid)?.seconds ?? 0;
    for (const [child, { parent }] of stats) if (parent === pid) pending.push(child);
  }
  return total;
}

/** CPU seconds used so far by the whole machine (every core, from /proc/stat). */
function machineCpuSeconds(): number {
  const [, user, nice, system, , , irq, softirq, steal] = readFileSync("/proc/stat", "utf8")
    .split("\n")[0]!
    .trim()
    .split(/\s+/u)
    .map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / 100;
}

/** CPU meters: the service's process tree, this script, and the rest of the machine (other work beside the bench). */
function cpuMeter(): () => {
  service: number;
  livekit: number;
  client: number;
  others: number;
  wall: number;
} {
  const at = {
    service: treeCpuSeconds(servicePid),
    livekit: livekit ? treeCpuSeconds(livekit.pid) : 0,
    client: process.cpuUsage(),
    machine: machineCpuSeconds(),
    wall: performance.now(),
  };
  return () => {
    const service = treeCpuSeconds(servicePid) - at.service;
    const usage = process.cpuUsage(at.client);
    const client = (usage.user + usage.system) / 1e6;
    const livekitCpu = livekit ? treeCpuSeconds(livekit.pid) - at.livekit : 0;
    const others = Math.max(0, machineCpuSeconds() - at.machine - service - livekitCpu - client);
    return { service, livekit: livekitCpu, client, others, wall: (performance.now() - at.wall) / 1000 };
  };
}

// ---------------------------------------------------------------- rooms
interface Access {
  readonly url: string;
  readonly token: string;
  readonly room_name: string;
}
/** What a participant's client offers the bench: an embedded room's socket, or a LiveKit participant. */
type MemberSocket = Pick<RealtimeSocket, "sendAudio" | "close"> & {
  readonly received: readonly {
    readonly at: number;
    readonly message?: Record<string, unknown>;
    readonly audio?: unknown;
  }[];
  settle(quietMs?: number, timeoutMs?: number): Promise<void>;
};
interface Member {
  readonly socket: MemberSocket;
  readonly identity: string;
  readonly language: string;
}
interface Room {
  readonly name: string;
  readonly speakers: readonly [Member, Member];
  readonly listeners: readonly [Member, Member];
}

async function post(pathname: string, body: unknown): Promise<Access> {
  const response = await fetch(new URL(pathname, service.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer: unknown = await response.json().catch(() => undefined);
  if (!response.ok) throw new Error(`POST ${pathname}: ${response.status} ${JSON.stringify(answer)}`);
  return answer as Access;
}

async function member(access: Access, language: string): Promise<Member> {
  if (LIVEKIT) {
    // As the meeting page does: each subscribes to its own language's track only.
    const participant = await LiveKitParticipant.join(access.url, access.token, {
      tracks: (name) => name === `translated-audio-${language}`,
    });
    await participant.publishMicrophone();
    return { socket: participant, identity: participant.identity, language };
  }
  const socket = await joinRoom(access);
  const identity = String(socket.messages.find((m) => m.type === "joined")?.identity);
  return { socket, identity, language };
}

async function openRoom(config: RoomConfig): Promise<Room> {
  const created = await post("/api/beta1/session", {
    languages: config.languages,
    language: "en",
    voice_type: "female",
  });
  const add = (language: string) =>
    post(`/api/beta1/session/${created.room_name}/participants`, { language });
  const accesses = [created, await add("en"), await add(config.listeners[0]), await add(config.listeners[1])];
  const [a, b, c, d] = [
    await member(accesses[0]!, "en"),
    await member(accesses[1]!, "en"),
    await member(accesses[2]!, config.listeners[0]),
    await member(accesses[3]!, config.listeners[1]),
  ];
  return { name: created.room_name, speakers: [a, b], listeners: [c, d] };
}

async function closeRoom(room: Room): Promise<void> {
  for (const m of [...room.speakers, ...room.listeners]) m.socket.close();
  await fetch(new URL("/api/beta1/session/end", service.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ session_id: room.name }),
  });
}

/** Streams `pcm` in 20 ms frames paced by the wall clock; resolves with when the frame holding sample `speechEnd − 1` was sent. */
async function stream(socket: MemberSocket, pcm: Int16Array, speechEnd: number): Promise<number> {
  const chunk = 320;
  const begin = performance.now();
  let endSent = Number.NaN;
  for (let offset = 0; offset < pcm.length; offset += chunk) {
    socket.sendAudio(pcm.subarray(offset, Math.min(pcm.length, offset + chunk)));
    if (Number.isNaN(endSent) && offset + chunk >= speechEnd) endSent = performance.now();
    const wait = begin + (offset + chunk) / 16 - performance.now();
    if (wait > 0) await sleep(wait);
  }
  return endSent;
}

// ---------------------------------------------------------------- a round
interface Measurement {
  readonly listener: string;
  /** End of speech → the closing final translation; null when none came after the end of speech. */
  readonly toFinal: number | null;
  /** End of speech → the first audio frame after that final; null when none came. */
  readonly toAudio: number | null;
  /** The other speaker's closing final reached this listener less than 1 s before this one's. */
  readonly ambiguous: boolean;
}

interface RoundResult {
  readonly measurements: Measurement[];
  readonly errors: string[];
  readonly speechSeconds: number;
}

type Received = MemberSocket["received"][number];

const isFinalFrom = (identity: string) => (r: Received) =>
  r.message?.type === "translated_transcript" &&
  r.message.is_final === true &&
  r.message.participant === identity;

/**
 * Every room's two speakers speak at once (room i starts i × offsetMs later), speaker A `pairOf(i)[0]`
 * and B `pairOf(i)[1]`; then each listener's closing final translation of each speaker is awaited.
 */
async function round(
  rooms: readonly Room[],
  pairOf: (room: number) => readonly [string, string],
  offsetMs: number,
): Promise<RoundResult> {
  const marks = rooms.map((room) =>
    [room.speakers, room.listeners].flat().map((m) => m.socket.received.length),
  );
  const ends = await Promise.all(
    rooms.map(async (room, i) => {
      await sleep(i * offsetMs);
      return Promise.all(
        room.speakers.map((speaker, j) => {
          const { pcm, speechEnd } = speech(pairOf(i)[j]!);
          return stream(speaker.socket, pcm, speechEnd);
        }),
      );
    }),
  );
  // Wait (at most 20 s after the last end of speech) for every listener's final of every speaker, then for quiet.
  const deadline = Math.max(...ends.flat()) + 20_000;
  for (const [i, room] of rooms.entries()) {
    for (const [k, listener] of room.listeners.entries()) {
      const from = marks[i]![2 + k]!;
      for (const [j, speaker] of room.speakers.entries()) {
        while (
          performance.now() < deadline &&
          !listener.socket.received
            .slice(from)
            .some((r) => isFinalFrom(speaker.identity)(r) && r.at > ends[i]![j]!)
        )
          await sleep(50);
      }
      await listener.socket.settle(800, 30_000).catch(() => undefined);
    }
  }
  const measurements: Measurement[] = [];
  const errors: string[] = [];
  for (const [i, room] of rooms.entries()) {
    const members = [...room.speakers, ...room.listeners];
    // A pipeline's error frame goes to everyone in the room: counted once.
    const frames = new Set<string>();
    for (const [n, m] of members.entries())
      for (const r of m.socket.received.slice(marks[i]![n]))
        if (r.message?.type === "error") frames.add(JSON.stringify(r.message));
    errors.push(...[...frames].map((frame) => String((JSON.parse(frame) as { error: unknown }).error)));
    for (const [k, listener] of room.listeners.entries()) {
      const received = listener.socket.received.slice(marks[i]![2 + k]);
      const closing = room.speakers.map((speaker) => received.findLast(isFinalFrom(speaker.identity)));
      for (const j of [0, 1]) {
        const end = ends[i]![j]!;
        const final = closing[j];
        const other = closing[1 - j];
        if (!final || final.at <= end) {
          measurements.push({ listener: listener.language, toFinal: null, toAudio: null, ambiguous: false });
          continue;
        }
        const audio = received.find((r) => r.audio && r.at >= final.at);
        measurements.push({
          listener: listener.language,
          toFinal: final.at - end,
          toAudio: audio ? audio.at - end : null,
          ambiguous: other !== undefined && other.at <= final.at && final.at - other.at < 1000,
        });
      }
    }
  }
  const speechSeconds = rooms.reduce(
    (sum, _, i) => sum + pairOf(i).reduce((s, name) => s + speech(name).speechEnd / 16_000, 0),
    0,
  );
  return { measurements, errors, speechSeconds };
}

const fallingBehind = (errors: readonly string[]) => errors.filter((e) => /falling behind/u.test(e)).length;
const ms = (value: number | null) => (value === null ? "–" : `${Math.round(value).toLocaleString("en-US")}`);
const p = (values: readonly (number | null)[], q: number) => ms(percentile([...values], q));

// ---------------------------------------------------------------- 1 and 2: one room, latency and CPU
const latencyRows = [
  "| room, 2 speaking at once | listener | utterances | end of speech → final translation p50 / p90 (ms) | end of speech → first translated audio p50 / p90 (ms) | missing | other speaker's final < 1 s before |",
  "| --- | --- | --- | --- | --- | --- | --- |",
];
const cpuRows = [
  `| room, 2 speaking at once | lanes per speaker | speech (2 speakers, 5 rounds) | wall time | service CPU (process tree) | CPU s per s of speech per speaker | ${LIVEKIT ? "LiveKit server / this script (cores) | " : ""}other work on the machine meanwhile (cores) |`,
  `| --- | --- | --- | --- | --- | --- | ${LIVEKIT ? "--- | " : ""}--- |`,
];
for (const config of CONFIGS) {
  const room = await openRoom(config);
  await round([room], () => WARM_UP, 0);
  const meter = cpuMeter();
  const all: Measurement[] = [];
  const errors: string[] = [];
  let speechSeconds = 0;
  for (let r = 0; r < LATENCY_ROUNDS; r++) {
    const result = await round([room], () => PAIRS[r % PAIRS.length]!, 0);
    all.push(...result.measurements);
    errors.push(...result.errors);
    speechSeconds += result.speechSeconds;
  }
  const { service: cpu, livekit: livekitCpu, client, others, wall } = meter();
  await closeRoom(room);
  const groups = [...new Set(config.listeners)].map((language) => ({
    label: `${language} (${config.listeners.filter((l) => l === language).length})`,
    ms: all.filter((m) => m.listener === language),
  }));
  if (groups.length > 1) groups.push({ label: "both", ms: all });
  for (const group of groups) {
    const missing = group.ms.filter((m) => m.toAudio === null).length;
    latencyRows.push(
      `| ${config.label} | ${group.label} | ${group.ms.length} | ` +
        `${p(
          group.ms.map((m) => m.toFinal),
          50,
        )} / ${p(
          group.ms.map((m) => m.toFinal),
          90,
        )} | ` +
        `**${p(
          group.ms.map((m) => m.toAudio),
          50,
        )} / ${p(
          group.ms.map((m) => m.toAudio),
          90,
        )}** | ` +
        `${missing} | ${group.ms.filter((m) => m.ambiguous).length} |`,
    );
  }
  cpuRows.push(
    `| ${config.label} | ${config.languages.length - 1} | ${speechSeconds.toFixed(1)} s | ${wall.toFixed(1)} s | ` +
      `${cpu.toFixed(1)} s | **${(cpu / speechSeconds).toFixed(3)}** | ` +
      `${LIVEKIT ? `${(livekitCpu / wall).toFixed(2)} / ${(client / wall).toFixed(2)} | ` : ""}${(others / wall).toFixed(2)} |`,
  );
  if (errors.length > 0) console.log(`${config.label}: error frames: ${errors.join("; ")}`);
}
console.log(latencyRows.join("\n"), "\n");
console.log(cpuRows.join("\n"), "\n");

// ---------------------------------------------------------------- 3: rooms at once
const capacityRows = [
  `| room | rooms at once | speakers at once | utterances | end of speech → first translated audio p50 / p90 (ms) | missing | dropped-input errors | service / ${LIVEKIT ? "LiveKit server / " : ""}this script / other work (cores of ${cpus().length}) | real time (p90 ≤ ${BOUND_MS.toLocaleString("en-US")} ms) |`,
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
];
const held = new Map<string, number>();
const capacityStarted = performance.now();
for (const config of CONFIGS) {
  const budget = capacityStarted + ((CONFIGS.indexOf(config) + 1) * CAPACITY_BUDGET_MS) / CONFIGS.length;
  held.set(config.label, 0);
  for (let n = 1; n <= MAX_ROOMS; n++) {
    let realTime = false;
    // A step that fails while other work took more than BUSY_CORES is run again (at most twice more).
    for (let attempt = 1; attempt <= 3; attempt++) {
      const step = await capacityStep(config, n);
      realTime = step.realTime;
      capacityRows.push(
        `| ${config.label} | ${n}${attempt > 1 ? ` (again, ${attempt})` : ""} | ${2 * n} | ${step.row} | ${realTime ? "yes" : "no"} |`,
      );
      if (realTime || step.othersCores <= BUSY_CORES) break;
      await sleep(5000);
    }
    if (!realTime) break;
    held.set(config.label, n);
    if (performance.now() > budget) {
      capacityRows.push(`| ${config.label} | (stopped: time budget) | | | | | | | |`);
      break;
    }
    await sleep(1000);
  }
}

/** `n` rooms of `config` at once, CAPACITY_ROUNDS rounds: the table's middle cells, whether it held, and the other work's cores. */
async function capacityStep(
  config: RoomConfig,
  n: number,
): Promise<{ row: string; realTime: boolean; othersCores: number }> {
  const rooms: Room[] = [];
  for (let i = 0; i < n; i++) rooms.push(await openRoom(config));
  const meter = cpuMeter();
  const all: Measurement[] = [];
  const errors: string[] = [];
  for (let r = 0; r < CAPACITY_ROUNDS; r++) {
    const result = await round(rooms, (i) => PAIRS[(i + r * n) % PAIRS.length]!, ROOM_OFFSET_MS);
    all.push(...result.measurements);
    errors.push(...result.errors);
  }
  const cpu = meter();
  await Promise.all(rooms.map(closeRoom));
  const toAudio = all.map((m) => m.toAudio);
  const p90 = percentile(toAudio, 90);
  const missing = all.filter((m) => m.toAudio === null).length;
  const dropped = fallingBehind(errors);
  if (errors.length > dropped)
    console.log(`${config.label}, ${n} rooms: other error frames: ${errors.join("; ")}`);
  const cores = [cpu.service, ...(LIVEKIT ? [cpu.livekit] : []), cpu.client, cpu.others]
    .map((c) => (c / cpu.wall).toFixed(2))
    .join(" / ");
  return {
    row: `${all.length} | ${p(toAudio, 50)} / ${ms(p90)} | ${missing} | ${dropped} | ${cores}`,
    realTime: missing === 0 && dropped === 0 && p90 !== null && p90 <= BOUND_MS,
    othersCores: cpu.others / cpu.wall,
  };
}
console.log(capacityRows.join("\n"), "\n");
console.log(
  [
    "| room (4 participants, 2 speaking at once) | rooms one process holds in real time |",
    "| --- | --- |",
    ...CONFIGS.map((config) => `| ${config.label} | **${held.get(config.label)}** |`),
  ].join("\n"),
  "\n",
);

console.log(`total ${((performance.now() - started) / 60_000).toFixed(1)} min`);
service.child.kill("SIGTERM");
await service.exited;
await livekit?.stop();
