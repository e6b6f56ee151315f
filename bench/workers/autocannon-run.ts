/**
 * autocannon through its API, in its own process (the CLI's argument parser
 * mangles JSON bodies and the `[<id>]` placeholder). Reads the options as
 * JSON from `--options` and prints `RESULT <autocannon result>`.
 */
import { createRequire } from 'node:module';
import { argMap, emitResult } from '../lib/child.ts';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as (o: object) => Promise<unknown>;
const args = argMap(process.argv.slice(2));
const options = JSON.parse(args.options ?? '{}') as object;
emitResult(await autocannon(options));
