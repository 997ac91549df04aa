/**
 * Thin wrapper over the SVOX Pico C API compiled to WASM (@echogarden/svoxpico-wasm, Apache-2.0).
 * One `PicoSynth` per locale: its own Pico system (memory area), two loaded resources, one voice
 * definition and one engine. All of them live in a single WASM instance, which is single-threaded,
 * so callers must not run two `synthesize` calls on one `PicoSynth` at the same time.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { SvoxPicoModule } from "@echogarden/svoxpico-wasm";

const PICO_OK = 0;
const PICO_STEP_IDLE = 200;
const PICO_STEP_BUSY = 201;
const PICO_DATA_PCM_16BIT = 1;
/** pico_resetEngine mode that keeps the loaded voice but drops pending text and audio. */
const PICO_RESET_SOFT = 0x10;
/** Pico's working memory besides the lingware, which it copies into the same area (pico2wave: 2.5 MB total). */
const WORK_MEMORY = 1_500_000;
/** pico_putTextUtf8 and pico_getData take 16-bit sizes. */
const MAX_TEXT_CHUNK = 32_000;
const OUT_BUFFER = 16_384;
/** Longest stretch of synthesis between event-loop yields, so other sessions keep flowing. */
const SLICE_MS = 8;

export const PICO_SAMPLE_RATE = 16_000;

let modulePromise: Promise<SvoxPicoModule> | undefined;

/**
 * Loads the WASM module once per process; its own console output goes to the first caller's `log`.
 * Engines share the instance safely: every Pico system, engine and scratch buffer is per `PicoSynth`.
 */
export function loadPicoModule(log: (line: string) => void): Promise<SvoxPicoModule> {
  modulePromise ??= import("@echogarden/svoxpico-wasm")
    .then(({ default: factory }) => factory({ print: log, printErr: log }))
    .catch((error: unknown) => {
      modulePromise = undefined; // let a later engine try again
      throw new Error(`SVOX Pico WASM module failed to load: ${(error as Error).message}`, { cause: error });
    });
  return modulePromise;
}

export class PicoSynth {
  private constructor(
    private readonly m: SvoxPicoModule,
    private readonly engine: number,
    /** Scratch cells: [0..3] pointer out-parameter, [4..5] int16 bytes, [6..7] int16 data type. */
    private readonly cells: number,
    private readonly out: number,
    private readonly cleanup: () => void,
  ) {}

  static async open(m: SvoxPicoModule, locale: string, taPath: string, sgPath: string): Promise<PicoSynth> {
    const [ta, sg] = await Promise.all([readFile(taPath), readFile(sgPath)]);
    const size = WORK_MEMORY + ta.length + sg.length;
    const allocations: number[] = [];
    const alloc = (bytes: number): number => {
      const pointer = m._malloc(bytes);
      if (!pointer) throw new Error(`SVOX Pico: out of WASM memory (${bytes} bytes)`);
      allocations.push(pointer);
      return pointer;
    };
    const cString = (text: string): number => {
      const bytes = Buffer.from(`${text}\0`, "utf8");
      const pointer = alloc(bytes.length);
      m.HEAPU8.set(bytes, pointer);
      return pointer;
    };
    const undo: (() => void)[] = [];
    const cleanup = (): void => {
      for (const step of undo.splice(0).reverse()) step();
      for (const pointer of allocations.splice(0)) m._free(pointer);
    };

    try {
      const memory = alloc(size);
      const cells = alloc(16);
      const out = alloc(OUT_BUFFER);
      const readPointer = (): number => new DataView(m.HEAPU8.buffer).getUint32(cells, true);
      const check = (status: number, what: string): void => {
        if (status !== PICO_OK) throw new Error(`SVOX Pico ${what} failed for ${locale} (status ${status})`);
      };

      check(m._pico_initialize(memory, size, cells), "initialisation");
      const system = readPointer();
      undo.push(() => {
        new DataView(m.HEAPU8.buffer).setUint32(cells, system, true);
        m._pico_terminate(cells);
      });

      const resourceNames: number[] = [];
      for (const [file, data] of [
        [taPath, ta],
        [sgPath, sg],
      ] as const) {
        // Pico reads lingware through stdio, so it is staged in Emscripten's in-memory FS just for the load.
        const virtualPath = `/${locale}-${path.basename(file)}`;
        m.FS.writeFile(virtualPath, data);
        try {
          check(m._pico_loadResource(system, cString(virtualPath), cells), `loading ${file}`);
        } finally {
          m.FS.unlink(virtualPath);
        }
        const resource = readPointer();
        undo.push(() => {
          new DataView(m.HEAPU8.buffer).setUint32(cells, resource, true);
          m._pico_unloadResource(system, cells);
        });
        const name = alloc(64);
        check(m._pico_getResourceName(system, resource, name), "reading a resource name");
        resourceNames.push(name);
      }

      const voiceName = cString(`relay-${locale}`);
      check(m._pico_createVoiceDefinition(system, voiceName), "creating the voice definition");
      undo.push(() => m._pico_releaseVoiceDefinition(system, voiceName));
      for (const name of resourceNames) {
        check(
          m._pico_addResourceToVoiceDefinition(system, voiceName, name),
          "adding a resource to the voice",
        );
      }
      check(m._pico_newEngine(system, voiceName, cells), "creating the engine");
      const engine = readPointer();
      undo.push(() => {
        new DataView(m.HEAPU8.buffer).setUint32(cells, engine, true);
        m._pico_disposeEngine(system, cells);
      });
      return new PicoSynth(m, engine, cells, out, cleanup);
    } catch (error) {
      cleanup();
      throw error;
    }
  }

  private heapView: DataView | undefined;

  /** A view of the WASM heap, renewed only when growth has replaced the underlying buffer. */
  private heap(): DataView {
    const buffer = this.m.HEAPU8.buffer;
    if (this.heapView?.buffer !== buffer) this.heapView = new DataView(buffer);
    return this.heapView;
  }

  /** Synthesizes UTF-8 text (Pico markup allowed) to 16 kHz PCM16. */
  async synthesize(text: string): Promise<Int16Array> {
    const m = this.m;
    const bytes = Buffer.from(`${text}\0`, "utf8");
    const input = m._malloc(bytes.length);
    if (!input) throw new Error("SVOX Pico: out of WASM memory for the text");
    const chunks: Int16Array[] = [];
    try {
      m.HEAPU8.set(bytes, input);
      let sliceStart = performance.now();
      let offset = 0;
      let stalled = 0;
      while (offset < bytes.length) {
        const size = Math.min(MAX_TEXT_CHUNK, bytes.length - offset);
        const status = m._pico_putTextUtf8(this.engine, input + offset, size, this.cells + 4);
        if (status !== PICO_OK) throw new Error(`SVOX Pico rejected the text (status ${status})`);
        const put = this.heap().getInt16(this.cells + 4, true);
        offset += put;
        // The engine takes no text only while its input buffer is full; draining below frees it.
        stalled = put > 0 ? 0 : stalled + 1;
        if (stalled > 2) throw new Error("SVOX Pico stopped accepting text");

        // Drain everything the engine can produce from the text it holds so far.
        for (;;) {
          const step = m._pico_getData(this.engine, this.out, OUT_BUFFER, this.cells + 4, this.cells + 6);
          if (step !== PICO_STEP_BUSY && step !== PICO_STEP_IDLE) {
            throw new Error(`SVOX Pico synthesis failed (status ${step})`);
          }
          const view = this.heap();
          const received = view.getInt16(this.cells + 4, true);
          if (received > 0 && view.getInt16(this.cells + 6, true) === PICO_DATA_PCM_16BIT) {
            // Copy out: the WASM heap may be replaced when it grows.
            chunks.push(new Int16Array(m.HEAPU8.slice(this.out, this.out + (received & ~1)).buffer));
          }
          if (step === PICO_STEP_IDLE) break;
          if (performance.now() - sliceStart > SLICE_MS) {
            await new Promise<void>((resolve) => setImmediate(resolve));
            sliceStart = performance.now();
          }
        }
      }
    } catch (error) {
      m._pico_resetEngine(this.engine, PICO_RESET_SOFT);
      throw error;
    } finally {
      m._free(input);
    }
    const total = chunks.reduce((sum, c) => sum + c.length, 0);
    const pcm = new Int16Array(total);
    let at = 0;
    for (const chunk of chunks) {
      pcm.set(chunk, at);
      at += chunk.length;
    }
    return pcm;
  }

  close(): void {
    this.cleanup();
  }
}
