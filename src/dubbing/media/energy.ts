/**
 * Signal energy, kept as sums so it adds up across segments and clips. Shared by recognition (the
 * original dialogue's level), synthesis (each clip's level) and mixing (the gain between the two).
 */

/** Sum of squared samples and their count: energies add up across segments. */
export interface Energy {
  readonly sumSquares: number;
  readonly samples: number;
}

export function energyOf(samples: ArrayLike<number>, scale = 1): Energy {
  let sumSquares = 0;
  for (let i = 0; i < samples.length; i++) sumSquares += (samples[i]! * scale) ** 2;
  return { sumSquares, samples: samples.length };
}

export function rmsOf(energies: readonly Energy[]): number {
  const total = energies.reduce((sum, e) => sum + e.sumSquares, 0);
  const count = energies.reduce((sum, e) => sum + e.samples, 0);
  return count > 0 ? Math.sqrt(total / count) : 0;
}
