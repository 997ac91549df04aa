/**
 * Machine translation by a self-hosted LibreTranslate server (Argos Translate models, many more
 * pairs than Apertium). Its pairs are read from the server's `GET /languages` when the engine is
 * created; each translation is one `POST /translate` of plain text. LibreTranslate takes no context,
 * so session context, labels and previous sentences are not sent. See client.ts for retries, time
 * limits and the circuit breaker.
 */
import type { EngineInfo, MtCapabilities, MtEngine, TranslateRequest } from "../../core/contracts.js";
import { LibreTranslateClient, type LibreTranslateOptions } from "./client.js";
import type { CircuitStatus } from "../kit/remote/guard.js";
import { serverLanguages, type ServerLanguages } from "./languages.js";

export type { LibreTranslateOptions } from "./client.js";

class LibreTranslateEngine implements MtEngine {
  get circuit(): CircuitStatus {
    return this.client.circuit;
  }

  readonly info: EngineInfo;
  readonly capabilities: MtCapabilities;

  constructor(
    private readonly client: LibreTranslateClient,
    private readonly languages: ServerLanguages,
    version: string | undefined,
  ) {
    this.info = { id: "libretranslate", version: version ?? "remote" };
    this.capabilities = { pairs: languages.pairs, usesContext: false, placeholder: "digits" };
  }

  async translate(request: TranslateRequest, signal?: AbortSignal): Promise<string> {
    const codes = this.languages.codes(request.from, request.to);
    if (!codes) {
      throw new Error(
        `LibreTranslate at ${this.client.displayUrl} does not translate ${request.from} → ${request.to}`,
      );
    }
    // The server answers 400 to an empty `q`.
    if (request.text.trim() === "") return "";
    return this.client.translate(request.text, codes.source, codes.target, signal);
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

/** Asks the server for its languages (and version); fails when it cannot be reached or offers no pair. */
export async function createLibreTranslateEngine(options: LibreTranslateOptions): Promise<MtEngine> {
  const client = new LibreTranslateClient(options);
  try {
    const [list, version] = await Promise.all([client.languages(), client.version()]);
    const languages = serverLanguages(list);
    if (languages.pairs.length === 0) {
      throw new Error(`LibreTranslate at ${client.displayUrl} offers no language pair relay can use`);
    }
    return new LibreTranslateEngine(client, languages, version);
  } catch (error) {
    client.close();
    throw error;
  }
}
