#!/usr/bin/env node
// The reference tokenizer for qmpi's tests: Hugging Face's own `tokenizers` (Rust, prebuilt for
// node as the npm package `tokenizers`), driven like `qmpi tokenize`: JSONL on stdin, one output
// line per input line.
//   node hf_tokenize.js TOKENIZER_JSON            {"text": ...} -> {"ids": [...]}  (no added BOS/EOS)
//   node hf_tokenize.js TOKENIZER_JSON --decode   {"ids": [...]} -> {"text": ...}
// The package is found under $QMPI_SOURCE_DIR/.cache/npm/node_modules (scripts/setup.sh puts it
// there), or beside this repository's .cache when QMPI_SOURCE_DIR is unset.
'use strict';
const path = require('path');
const readline = require('readline');

const args = process.argv.slice(2);
const decode = args.includes('--decode');
const files = args.filter((a) => !a.startsWith('--'));
if (files.length !== 1) {
  console.error('usage: node hf_tokenize.js TOKENIZER_JSON [--decode] < in.jsonl > out.jsonl');
  process.exit(2);
}
const root = process.env.QMPI_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const modulePath = path.join(root, '.cache', 'npm', 'node_modules', 'tokenizers');
let Tokenizer;
try {
  ({Tokenizer} = require(modulePath));
} catch (e) {
  console.error(`cannot load Hugging Face tokenizers from ${modulePath} (run scripts/setup.sh): ${e.message}`);
  process.exit(3);
}
const tokenizer = Tokenizer.fromFile(files[0]);

async function main() {
  const rl = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  for await (const line of rl) {
    const req = JSON.parse(line);
    let out;
    if (decode) {
      out = {text: await tokenizer.decode(req.ids, false)};
    } else {
      const enc = await tokenizer.encode(req.text, null, {addSpecialTokens: false});
      out = {ids: Array.from(enc.getIds())};
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
