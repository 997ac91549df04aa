import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import GithubSlugger from "github-slugger";
import { marked, type Token, type Tokens } from "marked";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../support/run-script.js";

/**
 * Every relative link in the project's Markdown resolves: the file exists, and an anchor names a
 * heading of it as GitHub renders it (github-slugger is GitHub's own slug rule). Links are read by a
 * Markdown parser, so code spans and blocks are not mistaken for links.
 */
const markdownIn = (dir: string): string[] =>
  readdirSync(path.join(PROJECT_ROOT, dir))
    .filter((name) => name.endsWith(".md"))
    .map((name) => path.join(dir, name));
const DOCUMENTS = [
  ...markdownIn("."),
  ...markdownIn("docs"),
  ...markdownIn("examples"),
  "packages/client/README.md",
];

function walk(tokens: readonly Token[], visit: (token: Token) => void): void {
  for (const token of tokens) {
    visit(token);
    const nested = (token as { tokens?: Token[]; items?: Token[] }).tokens ?? [];
    walk(nested, visit);
    for (const item of (token as { items?: Token[] }).items ?? []) walk([item], visit);
    if (token.type === "table") {
      const table = token as Tokens.Table;
      for (const cell of [...table.header, ...table.rows.flat()]) walk(cell.tokens, visit);
    }
  }
}

const parsed = new Map<string, Token[]>();
function tokensOf(file: string): Token[] {
  let tokens = parsed.get(file);
  if (!tokens) {
    tokens = marked.lexer(readFileSync(file, "utf8"));
    parsed.set(file, tokens);
  }
  return tokens;
}

function anchorsOf(file: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  walk(tokensOf(file), (token) => {
    if (token.type === "heading") anchors.add(slugger.slug((token as Tokens.Heading).text));
  });
  return anchors;
}

describe("the documentation's relative links", () => {
  it.each(DOCUMENTS)("%s: every relative link and anchor resolves", (document) => {
    const file = path.join(PROJECT_ROOT, document);
    const broken: string[] = [];
    walk(tokensOf(file), (token) => {
      if (token.type !== "link" && token.type !== "image") return;
      const href = (token as Tokens.Link).href;
      if (/^[a-z][a-z0-9+.-]*:/iu.test(href)) return; // http(s), mailto: not this project's files
      const [target = "", anchor] = href.split("#");
      const resolved = target ? path.resolve(path.dirname(file), decodeURIComponent(target)) : file;
      if (!existsSync(resolved)) {
        broken.push(`${href}: no such file`);
        return;
      }
      if (anchor === undefined || statSync(resolved).isDirectory() || !resolved.endsWith(".md")) return;
      if (!anchorsOf(resolved).has(decodeURIComponent(anchor))) broken.push(`${href}: no such heading`);
    });
    expect(broken).toEqual([]);
  });

  it.each(DOCUMENTS)("%s: every project path it names in code exists", (document) => {
    const missing: string[] = [];
    walk(tokensOf(path.join(PROJECT_ROOT, document)), (token) => {
      const named =
        token.type === "codespan"
          ? // A whole code span that is a path into the project's own folders.
            [
              /^(?:src|test|scripts|docs|examples|packages|data)\/[\w./-]+$/u.exec(
                (token as Tokens.Codespan).text,
              )?.[0],
            ]
          : token.type === "text" && !("tokens" in token && token.tokens)
            ? // A source file named in prose (not one of ../shared's).
              [
                ...token.raw.matchAll(
                  /(?<![\w./])(?:src|test|scripts|examples|packages)\/[\w./-]+\.(?:ts|js|mjs|sh|json)\b/gu,
                ),
              ].map((m) => m[0])
            : [];
      for (const file of named) {
        if (!file || file.includes("*")) continue;
        if (!existsSync(path.join(PROJECT_ROOT, file))) missing.push(file);
      }
    });
    expect(missing).toEqual([]);
  });
});
