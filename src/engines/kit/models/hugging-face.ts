/**
 * Pulling and verifying a model published as files of a Hugging Face repository (or of a mirror
 * with its layout: `<base>/<repo>/resolve/main/<file>`), for the families that pull that way
 * (translation models, the tone colour converter). Each file downloads resumably (download.ts)
 * into a staging directory beside the model's (`.pull-<name>`) that survives an interruption; the
 * model's directory appears only once every file is there and checked, so it is never half-pulled.
 *
 * Checksums: Hugging Face states the SHA-256 of every large (LFS) file in the `X-Linked-Etag` header
 * of its `resolve` answer (the redirect to the file's storage). A file that does not match is
 * refused and deleted. Small files (JSON) have no such statement; the manifest records every
 * file's SHA-256 and size as pulled, and `verify` checks the files against it and checks that the
 * model has what its engine needs (the family's own check).
 *
 * Sizes: the answer states each file's size (`X-Linked-Size`, or a small file's `Content-Length`, as
 * huggingface_hub reads them), and its download stops there (download.ts); a model with an
 * approximate size is bounded as a whole too. What the source or the files say is quoted as plain
 * text: a mirror's bytes never reach a terminal as they are.
 */
import { existsSync } from "node:fs";
import { lstat, mkdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import {
  checkPulledFiles,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_DEADLINE_MS,
  downloadModel,
  fileDigest,
  formatMiB,
  ModelError,
  RefusedDownload,
  type DownloadOptions,
} from "./download.js";
import { modelRecord, plainText, readRecord, writeRecord } from "./model-dir.js";
import { APPROX_MARGIN_TEXT, approxLimit } from "./sizes.js";

export const HUGGING_FACE = "https://huggingface.co";

/** What a pull needs to know of a model published on Hugging Face. */
export interface HubModel {
  /** The name `relay models pull <name>` uses. */
  readonly name: string;
  /** "Xenova/opus-mt-en-es". */
  readonly repo: string;
  readonly licence: string;
  /** Paths inside the repository to download (kept as they are in the model's directory). */
  readonly files: readonly string[];
  /** The whole model's approximate size, MiB: all its files together are bounded by it (sizes.ts's approxLimit). */
  readonly approxMiB?: number;
}

/** What keeps the files in `dir` from loading as the family's model, if anything. */
export type HubModelCheck = (dir: string) => Promise<string | undefined>;

const manifestSchema = modelRecord.extend({
  repo: z.string(),
  /** The catalogue's licence of the repository. */
  licence: z.string(),
  /** The files whose SHA-256 Hugging Face stated, and which matched it. */
  checkedAgainstSource: z.array(z.string()),
});
export type HubManifest = z.infer<typeof manifestSchema>;

/** The record `pull` leaves in a model's directory, if it is there, whole, and not a link. */
export function readHubManifest(dir: string): HubManifest | undefined {
  return readRecord(dir, manifestSchema);
}

/** Where the files of the model going to `target` download to: beside it, kept across interruptions. */
export function hubStagingDir(target: string): string {
  return path.join(path.dirname(target), `.pull-${path.basename(target)}`);
}

/** The source did not answer (offline, or its name does not resolve). */
class Unreachable extends ModelError {}

/**
 * How to install a model on a machine that cannot reach the source: the same pull finishes from
 * files copied into its staging directory (checked as pulled files are, minus the source's SHA-256).
 */
function byHand(model: HubModel, base: string, staging: string): string {
  return (
    `To install ${model.name} by hand, download ${model.files.join(", ")} from ${base}/${model.repo}/resolve/main/ ` +
    `on a connected machine, copy them into ${staging}/ (keeping their folders), then run ` +
    `\`relay models pull ${model.name}\` again: it finishes from those files`
  );
}

/** What the source says of a file before it is downloaded. */
interface Statement {
  readonly exists: boolean;
  readonly sha256?: string;
  readonly bytes?: number;
}

/** A family's check quotes the files (a JSON value, an ONNX input): plain, and long enough to say what is wrong. */
const PROBLEM_CHARS = 400;

/** A size header's value, if it is a whole number of bytes. */
function sizeHeader(value: string | null): number | undefined {
  return value !== null && /^\d{1,16}$/u.test(value.trim()) ? Number(value) : undefined;
}

/**
 * Asks for the file without following the redirect: Hugging Face's answer states an LFS file's
 * SHA-256 and size, or is a small file's own answer with its Content-Length (huggingface_hub reads
 * the size the same way, asking for the identity encoding so the length is the file's).
 */
async function statementOf(url: string, options: DownloadOptions, timeoutMs: number): Promise<Statement> {
  const fetchImpl = options.fetchImpl ?? fetch;
  const timeout = AbortSignal.timeout(timeoutMs);
  let response: Response;
  try {
    response = await fetchImpl(url, {
      method: "HEAD",
      redirect: "manual",
      headers: { "accept-encoding": "identity" },
      signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
    });
  } catch (error) {
    if (options.signal?.aborted) throw new ModelError(`pull cancelled`);
    const cause = timeout.aborted
      ? `no response within ${timeoutMs / 1000} s`
      : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message);
    throw new Unreachable(
      `cannot reach ${new URL(url).host} (${plainText(cause)}). Is this machine offline?`,
    );
  }
  if (response.status === 404) return { exists: false };
  if (response.status >= 400) throw new ModelError(`HTTP ${response.status} for ${url}`);
  const etag = response.headers.get("x-linked-etag")?.replace(/^W\//u, "").replaceAll('"', "");
  const size =
    sizeHeader(response.headers.get("x-linked-size")) ??
    (response.ok ? sizeHeader(response.headers.get("content-length")) : undefined);
  return {
    exists: true,
    ...(etag && /^[0-9a-f]{64}$/u.test(etag) ? { sha256: etag } : {}),
    ...(size !== undefined ? { bytes: size } : {}),
  };
}

/**
 * Runs the downloads of a pull staged in `staging`: a source that sent or stated something other
 * than a file is not trusted for the others either, and the files it sent before go with it (an
 * interrupted transfer keeps them, for a resume).
 */
async function clearedOnRefusal(staging: string, downloads: () => Promise<void>): Promise<void> {
  try {
    await downloads();
  } catch (error) {
    if (error instanceof RefusedDownload) await rm(staging, { recursive: true, force: true });
    throw error;
  }
}

export interface HubPullResult {
  readonly dir: string;
  readonly bytes: number;
  /** Bytes kept from an earlier, interrupted pull. */
  readonly resumedFrom: number;
  /** Files whose SHA-256 the source stated (and matched), of all files. */
  readonly checked: number;
  readonly files: number;
}

export interface HubPullPlan {
  /** The model's directory: it appears only once every file is there and checked. */
  readonly target: string;
  /** Files the repository may lack (their engine does without them). */
  readonly optional?: ReadonlySet<string>;
  /** Run on the downloaded files before they move into place; a problem deletes them. */
  readonly check: HubModelCheck;
}

/** Downloads (or resumes) `model`'s files, checks them, records them and moves the model into place. */
export async function pullHubModel(
  model: HubModel,
  plan: HubPullPlan,
  options: DownloadOptions = {},
): Promise<HubPullResult> {
  const { target } = plan;
  const optional = plan.optional ?? new Set<string>();
  const staging = hubStagingDir(target);
  const base = (options.baseUrl ?? HUGGING_FACE).replace(/\/+$/u, "");
  const digests: Record<string, string> = {};
  const sizes: Record<string, number> = {};
  const checked: string[] = [];
  // Whatever is where the staging directory goes and is not a real directory (a planted link) goes.
  for (const where of [path.dirname(staging), staging]) {
    const planted = await lstat(where).catch(() => undefined);
    if (planted && !planted.isDirectory()) await rm(where, { force: true });
  }
  let bytes = 0;
  let resumedFrom = 0;
  // One deadline for the whole pull, every file's statement and download within it.
  const startedAt = Date.now();
  const left = (ms: number) => Math.max(0, ms - (Date.now() - startedAt));
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  const modelLimit = model.approxMiB === undefined ? undefined : approxLimit(model.approxMiB);
  await clearedOnRefusal(staging, async () => {
    for (const file of model.files) {
      const url = `${base}/${model.repo}/resolve/main/${file}`;
      const dir = path.join(staging, path.dirname(file));
      const local = path.join(staging, file);
      const timeoutMs = Math.min(options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, left(deadlineMs));
      const statement = await statementOf(url, options, timeoutMs).catch((error: unknown): Statement => {
        if (!(error instanceof Unreachable)) throw error;
        // Offline: a file already here (copied by hand, or from an earlier pull) is taken as it is.
        if (existsSync(local) || optional.has(file)) return { exists: existsSync(local) };
        throw new Unreachable(`${error.message} ${byHand(model, base, staging)}`);
      });
      if (!statement.exists) {
        if (optional.has(file)) continue;
        throw new ModelError(`${model.repo} has no ${file} (${url})`);
      }
      // A file completed by an interrupted pull is kept when it still matches.
      const done = existsSync(local) ? await fileDigest(local, "sha256") : undefined;
      const doneSize = done === undefined ? undefined : (await stat(local)).size;
      if (
        done !== undefined &&
        (statement.sha256 === undefined || done === statement.sha256) &&
        (statement.bytes === undefined || doneSize === statement.bytes)
      ) {
        digests[file] = done;
        if (statement.sha256) checked.push(file);
        sizes[file] = doneSize!;
        bytes += doneSize!;
        continue;
      }
      await rm(local, { force: true });
      const remaining = modelLimit === undefined ? undefined : modelLimit - bytes;
      if (remaining !== undefined && (statement.bytes ?? 0) > remaining)
        throw new RefusedDownload(
          `${model.name}: ${base} states ${file} is ${statement.bytes} bytes, more than the ${remaining} bytes ` +
            `left of the ${modelLimit} the model may take (about ${model.approxMiB} MiB, ${APPROX_MARGIN_TEXT}); the pull's files were deleted`,
        );
      const result = await downloadModel(
        {
          name: `${model.name}: ${file}`,
          file: path.basename(file),
          url,
          ...(statement.sha256 ? { sha256: statement.sha256 } : {}),
          ...(statement.bytes !== undefined ? { bytes: statement.bytes } : {}),
          ...(remaining !== undefined ? { maxBytes: remaining } : {}),
        },
        dir,
        { ...options, baseUrl: undefined, deadlineMs: left(deadlineMs) },
      );
      digests[file] = result.sha256;
      sizes[file] = result.bytes;
      if (statement.sha256) checked.push(file);
      bytes += result.bytes;
      resumedFrom += result.resumedFrom;
    }
  });
  const problem = await plan.check(staging);
  if (problem) {
    await rm(staging, { recursive: true, force: true });
    throw new ModelError(`${model.name}: ${plainText(problem, PROBLEM_CHARS)}; the download was deleted`);
  }
  const manifest: HubManifest = {
    name: model.name,
    repo: model.repo,
    licence: model.licence,
    files: digests,
    sizes,
    checkedAgainstSource: checked,
  };
  await writeRecord(staging, manifest);
  await mkdir(path.dirname(target), { recursive: true });
  await rm(target, { recursive: true, force: true });
  await rename(staging, target);
  return { dir: target, bytes, resumedFrom, checked: checked.length, files: Object.keys(digests).length };
}

export interface HubVerifyResult {
  readonly ok: boolean;
  readonly message: string;
}

export interface HubVerifyPlan {
  /** The model's directory. */
  readonly dir: string;
  /** Whether the files its engine cannot do without are there. */
  readonly pulled: boolean;
  /** What the service checks before it loads the model (links out of the models directory, sizes). */
  readonly loadProblem: () => string | undefined;
  readonly check: HubModelCheck;
}

/** Checks a pulled model's files against its manifest and what its engine needs. */
export async function verifyHubModel(model: { name: string }, plan: HubVerifyPlan): Promise<HubVerifyResult> {
  const manifest = readHubManifest(plan.dir);
  const recorded = await checkPulledFiles(model.name, plan.dir, plan.pulled, manifest?.files);
  if (!recorded.ok) return recorded;
  const loading = plan.loadProblem();
  if (loading) return { ok: false, message: `${loading} (run \`relay models pull ${model.name}\`)` };
  const problem = await plan.check(plan.dir);
  if (problem) return { ok: false, message: plainText(problem, PROBLEM_CHARS) };
  const files = Object.keys(manifest!.files).length;
  return {
    ok: true,
    message: `ok (${formatMiB(recorded.bytes)}; ${files} files match the SHA-256 recorded at pull, ${manifest!.checkedAgainstSource.length} of them stated by Hugging Face)`,
  };
}
