/**
 * Plain-text deformatter/reformatter for the Apertium stream format, done in TypeScript so a request
 * costs no extra processes (apertium-destxt/retxt would add two spawns per sentence).
 *
 * Stream format facts this relies on (checked against lttoolbox 3.7 / apertium 3.8):
 * - `\ ^ $ / < > @ { } [ ]` are reserved; backslash-escaped they travel through every stage and come
 *   out still escaped.
 * - `*`, `#` and `~` are not reserved but are meaningful: lt-proc drops the backslash of `\*`, and the
 *   generator marks unknown words with `*`, `@` and `#`, and the post-generator consumes `~`. A user's
 *   `*` would then be indistinguishable from a mark, so we carry these three inside superblanks
 *   (`[*]`), whose content every stage passes through verbatim and which act as word separators —
 *   exactly how lt-proc treats these characters anyway.
 * - Newlines go into superblanks too (as apertium-destxt does), so the text stays one segment.
 * - apertium-destxt ends the text with "." so the tagger and transfer see a sentence end; we do the
 *   same and drop that "." again. Our end superblank carries a per-request nonce, which doubles as
 *   a check that the answer we read belongs to the request we sent.
 */

const ESCAPED = new Set(["\\", "^", "$", "/", "<", ">", "@", "{", "}", "[", "]"]);
const SUPERBLANKED = new Set(["*", "#", "~"]);
/** Generator marks (unknown word, not in bilingual dictionary, not generable) and stray `~`. */
const MARKS = new Set(["*", "@", "#", "~"]);

/** NUL is the protocol's segment terminator and other control characters upset some stages. */
function controlToSpace(c: string): string {
  const code = c.charCodeAt(0);
  return (code < 0x20 && c !== "\n" && c !== "\r" && c !== "\t") || code === 0x7f ? " " : c;
}

export function endMarker(nonce: string): string {
  return `[${nonce}]`;
}

/** Stream-format text for `text` (trimmed, non-empty), ending with the nonce superblank. */
export function deformat(text: string, nonce: string): string {
  let out = "";
  let superblank = "";
  const flush = (): void => {
    if (superblank) out += `[${superblank}]`;
    superblank = "";
  };
  const clean = [...text].map(controlToSpace).join("");
  for (let i = 0; i < clean.length; i++) {
    const c = clean[i]!;
    if (SUPERBLANKED.has(c)) {
      superblank += c;
      continue;
    }
    if (c === "\n" || c === "\r") {
      // The whole whitespace run around the line break goes into one superblank.
      while (out.endsWith(" ") || out.endsWith("\t")) {
        superblank = out.slice(-1) + superblank;
        out = out.slice(0, -1);
      }
      superblank += c;
      while (i + 1 < clean.length && /\s/.test(clean[i + 1]!)) superblank += clean[++i]!;
      continue;
    }
    flush();
    out += ESCAPED.has(c) ? `\\${c}` : c;
  }
  flush();
  return `${out}.${endMarker(nonce)}`;
}

/**
 * Plain text of one pipeline answer, or undefined when it does not end with the expected nonce
 * (the pipeline lost sync). Unescapes, unwraps superblanks, strips unknown-word marks, drops the
 * "." added by `deformat`, collapses spaces left by dropped words and trims.
 */
export function reformat(output: string, nonce: string): string | undefined {
  const marker = endMarker(nonce);
  const at = output.lastIndexOf(marker);
  if (at < 0 || (at > 0 && output[at - 1] === "\\")) return undefined;
  let body = output.slice(0, at) + output.slice(at + marker.length);
  body = body.replace(/\s+$/, "");
  if (body.endsWith(".")) body = body.slice(0, -1); // no stage escapes ".", so this is ours

  let out = "";
  let pendingSpace = false;
  const emit = (s: string): void => {
    if (pendingSpace && out) out += " ";
    pendingSpace = false;
    out += s;
  };
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === "\\") {
      if (i + 1 < body.length) emit(body[++i]!);
    } else if (c === "[") {
      let content = "";
      let j = i + 1;
      for (; j < body.length && body[j] !== "]"; j++) {
        if (body[j] === "\\" && j + 1 < body.length) j++;
        content += body[j]!;
      }
      if (j >= body.length) {
        emit(body.slice(i)); // unterminated: cannot be ours, keep it as text
        break;
      }
      i = j;
      if (content) {
        // Spaces around a user's line break are kept exactly; a pending blank merges into it.
        pendingSpace = pendingSpace && !/^\s/.test(content);
        emit(content);
      }
    } else if (c === " " || c === "\t") {
      pendingSpace = true;
    } else if (!MARKS.has(c)) {
      emit(c);
    }
  }
  return out.trim();
}
