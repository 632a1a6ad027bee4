#!/usr/bin/env bash
# Make the two screenshots in docs/images from a real run: report.html of a Pendulum
# DDPG run, and TensorBoard showing its curves. Needs rltrain installed and Chromium
# (Debian: apt-get install -y chromium). TensorBoard listens on 127.0.0.1 only.
#   bash docs/screenshots.sh [WORKDIR]   # WORKDIR holding logs/tour is reused as it is
set -euo pipefail
IMAGES="$(cd "$(dirname "$0")" && pwd)/images"
WORK="${1:-$(mktemp -d)}"
PORT="${PORT:-6123}"
CHROMIUM=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars
          --force-device-scale-factor=1)
mkdir -p "$IMAGES" && cd "$WORK"

if [ ! -d logs/tour ]; then
    rltrain train --config pendulum_ddpg.yaml --run-name tour --set torch_threads=1
fi
rltrain diagnose tour > /dev/null
"${CHROMIUM[@]}" --window-size=1200,1500 --screenshot="$IMAGES/report.png" \
    "file://$WORK/logs/tour/report.html"

tensorboard --logdir logs --host 127.0.0.1 --port "$PORT" > tensorboard.log 2>&1 &
TB=$!
trap 'kill "$TB"' EXIT
for _ in $(seq 60); do
    curl -sf "http://127.0.0.1:$PORT/" > /dev/null && break
    sleep 1
done
"${CHROMIUM[@]}" --window-size=1400,760 --virtual-time-budget=20000 \
    --screenshot="$IMAGES/tensorboard.png" \
    "http://127.0.0.1:$PORT/?darkMode=false#scalars&tagFilter=eval%2Fmean_reward%7Crollout%2Fep_rew_mean%7Ctrain%2Fcritic_loss"
echo "wrote $IMAGES/report.png and $IMAGES/tensorboard.png"
