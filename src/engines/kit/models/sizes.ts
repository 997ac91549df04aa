/**
 * How large a model file may be, from what is published about it, for download.ts: a transfer
 * stops once it passes this bound (a mirror may send far more than the file, or say it will), and
 * the disk must have room for what is expected before a transfer starts.
 */
import { statfs } from "node:fs/promises";

/** What is published of a file's size (a catalogue entry's, or what the source stated). */
export interface PublishedSize {
  /** Size as upstream states it, in MiB (rounded by upstream: only a sanity bound, never exact). */
  readonly sizeMiB?: number;
  /** Exact size in bytes, when known. */
  readonly bytes?: number;
  /** Approximate size in MiB from listings rather than upstream's own statement (sherpa-onnx's archives). */
  readonly approxMiB?: number;
  /** The most the file may hold, whatever else is known (default: UNSTATED_SIZE_LIMIT when no size is). */
  readonly maxBytes?: number;
}

const MiB = 1024 * 1024;
/**
 * Catalogue sizes taken from listings (sherpa-onnx's archives: "about 33 MiB") are unverified, and
 * an archive is sometimes re-packed larger upstream: half again plus 8 MiB keeps real archives
 * inside while a transfer running on past it (a 400 MiB ".partial" for 33 MiB) is stopped.
 */
const APPROX_SIZE_MARGIN = 0.5;
const APPROX_SIZE_SLACK = 8 * MiB;
/**
 * No size known at all (whisper's quantised variants, a file a mirror states nothing about): more
 * than any catalogue model (whisper large-v3-turbo, 1.5 GiB).
 */
const UNSTATED_SIZE_LIMIT = 2 * 1024 * MiB;

/** An estimate's bound (APPROX_SIZE_MARGIN), as messages state it. */
export const APPROX_MARGIN_TEXT = `plus ${APPROX_SIZE_MARGIN * 100} % and ${APPROX_SIZE_SLACK / MiB} MiB`;

export function formatMiB(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}

/** The most bytes a file of about `approxMiB` MiB may have (see APPROX_SIZE_MARGIN). */
export function approxLimit(approxMiB: number): number {
  return Math.ceil(approxMiB * MiB * (1 + APPROX_SIZE_MARGIN) + APPROX_SIZE_SLACK);
}

/** The size a file is expected to have, when anything is published (for the free-space check). */
export function expectedSize(size: PublishedSize): number | undefined {
  const mib = size.sizeMiB ?? size.approxMiB;
  return size.bytes ?? (mib === undefined ? undefined : Math.round(mib * MiB));
}

/**
 * Upstream's sizes are rounded ("75 MiB" for 74.1 MiB): a file this far off is truncated or another
 * file, whatever its checksum.
 */
export function outsidePublishedSize(size: PublishedSize, bytes: number): boolean {
  if (size.sizeMiB === undefined) return false;
  const expected = size.sizeMiB * MiB;
  return Math.abs(bytes - expected) > roundingTolerance(expected);
}

function roundingTolerance(expected: number): number {
  return Math.max(0.05 * expected, 2 * MiB);
}

/**
 * The most bytes a transfer of a file may bring, and why: its exact size when published, upstream's
 * rounded size within the tolerance `outsidePublishedSize` allows, an approximate one with its
 * margin, else UNSTATED_SIZE_LIMIT; never more than `maxBytes`.
 */
export function transferLimit(size: PublishedSize): { readonly bytes: number; readonly why: string } {
  const published =
    size.bytes !== undefined
      ? { bytes: size.bytes, why: "its published size" }
      : size.sizeMiB !== undefined
        ? {
            bytes: Math.floor(size.sizeMiB * MiB + roundingTolerance(size.sizeMiB * MiB)),
            why: `upstream states ${size.sizeMiB} MiB`,
          }
        : size.approxMiB !== undefined
          ? { bytes: approxLimit(size.approxMiB), why: `about ${size.approxMiB} MiB, ${APPROX_MARGIN_TEXT}` }
          : { bytes: UNSTATED_SIZE_LIMIT, why: "no size is published: the most any model takes" };
  return size.maxBytes !== undefined && size.maxBytes < published.bytes
    ? { bytes: size.maxBytes, why: "what is left of the model's size" }
    : published;
}

/** Why the disk holding `dir` cannot take `bytes` more of `what` (for an unprivileged writer), if it cannot. */
export async function freeSpaceProblem(
  dir: string,
  bytes: number,
  what: string,
): Promise<string | undefined> {
  const { bavail, bsize } = await statfs(dir);
  const free = bavail * bsize;
  if (bytes <= free) return undefined;
  return `not enough disk space for ${what}: it needs ${formatMiB(bytes)} in ${dir}, ${formatMiB(free)} are free`;
}
