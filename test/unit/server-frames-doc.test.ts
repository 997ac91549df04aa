import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { serverMessage } from "../../src/wire/messages.js";
import { PROJECT_ROOT } from "../support/run-script.js";

/** docs/realtime-api.md lists every JSON frame type the server sends (its schema is the source). */

function typesOf(schema: z.ZodType): string[] {
  const def = (schema as unknown as { def: Record<string, unknown> }).def;
  if (def["type"] === "union") return (def["options"] as z.ZodType[]).flatMap(typesOf);
  if (def["type"] === "pipe") return typesOf(def["in"] as z.ZodType);
  const type = (def["shape"] as Record<string, z.ZodType> | undefined)?.["type"];
  if (!type) return [];
  const typeDef = (type as unknown as { def: { type: string; values?: unknown[]; entries?: object } }).def;
  if (typeDef.type === "literal") return typeDef.values!.map(String);
  if (typeDef.type === "enum") return Object.values(typeDef.entries!).map(String);
  return [];
}

describe("the frames the server sends", () => {
  it("are each listed in docs/realtime-api.md", () => {
    const types = [...new Set(typesOf(serverMessage))];
    expect(types).toEqual(expect.arrayContaining(["ready", "error", "notice", "joined", "participant_left"]));
    const doc = readFileSync(`${PROJECT_ROOT}/docs/realtime-api.md`, "utf8");
    const section = doc.slice(doc.indexOf("## The frames the server sends"));
    const table = section.slice(0, section.indexOf("\n## "));
    const listed = new Set(
      [...table.matchAll(/^\| ([^|]+) \|/gmu)].flatMap(([, cell]) =>
        [...cell!.matchAll(/`([a-z_]+)`/gu)].map((m) => m[1]),
      ),
    );
    expect(types.filter((type) => !listed.has(type))).toEqual([]);
  });
});
