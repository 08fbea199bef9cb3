/** Peak resident set of this process, MB (VmHWM; see peak-rss.js). */
export function peakRssMB(): number
